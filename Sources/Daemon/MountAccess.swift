import Control
import FuseBridge
import Glibc
import HostText

/// Who the kernel lets into the mount, and as whom the file system sees
/// them: the FUSE options and the bridge's uid rules for a daemon of
/// `ownerUID` (ARCHITECTURE.md, decisions 8 and 43).
struct MountAccess {
    var options = ["subtype=scopefs"]
    /// Root's apps run as the app account; to the file system they act as
    /// the owner.
    var alias: OwnerAlias?
    /// The uids a root daemon serves without `--allow-other`; every other
    /// uid gets EACCES as the kernel gave it.
    var admittedUsers: AdmittedUsers?

    /// `source`: what the mount table shows as the mount's source, the
    /// state directory's absolute path, as fstab's device column names it
    /// for mount.scopefs. The bare word `scopefs` was a relative path to
    /// mount(8) and umount(8), which resolved it against a `./scopefs`
    /// folder (issue 50, finding 4).
    init(source: String, ownerUID: uid_t, ownerGID: gid_t, appAccount: AppAccount?, allowOther: Bool) {
        // A name that is not UTF-8 keeps the word: the options travel as UTF-8.
        let plain = source.hostBytes == Array(source.utf8)
        options.insert("fsname=" + (plain ? Self.escapedOption(source) : "scopefs"), at: 0)
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

    /// A value inside libfuse's `-o` list, where a comma ends it and a
    /// backslash escapes the next character.
    static func escapedOption(_ value: String) -> String {
        value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: ",", with: "\\,")
    }
}
