import CFuse3
import Glibc

/// Which uids a mount serves, when the kernel no longer decides it. A FUSE
/// mount without `allow_other` lets only its owner's uid in; a root daemon
/// mounts with `allow_other` for the app account its apps run as
/// (`OwnerAlias`), and without `--allow-other` still answers any other
/// uid as the kernel did: EACCES, before anything else is looked at.
public struct AdmittedUsers: Sendable, Equatable {
    public var uids: [uid_t]

    public init(_ uids: [uid_t]) {
        self.uids = uids
    }

    func admits(_ uid: uid_t) -> Bool { uids.contains(uid) }
}

extension Bridge {
    /// Whether `request` comes from a uid the mount serves.
    @inline(__always)
    static func admitted(_ request: fuse_req_t) -> Bool {
        guard let users = BridgeContext.from(fuse_req_userdata(request)!).admittedUsers else { return true }
        return users.admits(fuse_req_ctx(request)!.pointee.uid)
    }
}
