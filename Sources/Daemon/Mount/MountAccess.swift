import Control
import FuseBridge
import Glibc

/// Who the kernel lets into the mount, and as whom the file system sees
/// them: the FUSE options and the bridge's uid rules for a daemon of
/// `ownerUID` (docs/DECISIONS.md, decisions 8 and 43).
struct MountAccess {
    var options = ["subtype=scopefs"]
    /// Root's apps run as the app account; to the file system they act as
    /// the owner.
    var alias: OwnerAlias?
    /// The uids a root daemon serves without `--allow-other`; every other
    /// uid gets EACCES as the kernel gave it.
    var admittedUsers: AdmittedUsers?

    /// What the mount table shows as the mount's source. Not the state
    /// directory's path: an app reads its sandbox's mountinfo, and no host
    /// path of the state directory may show there (S47). Not the bare
    /// word `scopefs` either, which mount(8) and umount(8) took for a
    /// relative path and resolved against a `./scopefs` folder (issue 50,
    /// finding 4); with a colon it reads as a network source, which they
    /// leave alone.
    static let source = "scopefs:"

    init(ownerUID: uid_t, ownerGID: gid_t, appAccount: AppAccount?, allowOther: Bool) {
        options.insert("fsname=" + Self.source, at: 0)
        if ownerUID == 0 {
            // Apps run as the app account, which the kernel lets in only
            // with allow_other. With --allow-other the kernel checks other
            // users as before.
            options.append("allow_other")
            if allowOther {
                options.append("default_permissions")
            } else {
                admittedUsers = AdmittedUsers([ownerUID] + (appAccount.map { [$0.uid] } ?? []))
            }
            alias = appAccount.map {
                OwnerAlias(appUID: $0.uid, appGID: $0.gid, ownerUID: ownerUID, ownerGID: ownerGID)
            }
        } else if allowOther {
            // Without allow_other the kernel lets only the daemon's own user
            // in, so the host file system's checks (made with the daemon's
            // credentials) are the caller's; the kernel's would repeat them
            // and cost a GETATTR of the folder after every create or
            // unlink. Other users' processes are checked by the kernel.
            options += ["allow_other", "default_permissions"]
        }
    }
}
