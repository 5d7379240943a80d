import CFuse3
import Glibc

/// The app account standing in for the owner (SPEC S5, docs/SECURITY.md
/// "Who an app runs as"). When the owner is root, app processes run as an
/// unprivileged host account, so an app is never host root; to the file
/// system they still act as the owner, as they did when they ran as the
/// owner's uid:
/// - a request from the app account is handled as the owner's (new files
///   stay the owner's on the host, set-id clearing and group checks are the
///   owner's);
/// - a chown to the app account is a chown to the owner;
/// - attributes sent back to the app account show the owner's files as the
///   app's own, so programs that check ownership (git's safe.directory, ssh)
///   trust their container and granted folders.
/// Every other caller is left as it is: a process of the app account that
/// is not an app process is a stranger to the gate (its /proc uid is not
/// the owner's) and sees nothing.
public struct OwnerAlias: Sendable, Equatable {
    public var appUID: uid_t
    public var appGID: gid_t
    public var ownerUID: uid_t
    public var ownerGID: gid_t

    public init(appUID: uid_t, appGID: gid_t, ownerUID: uid_t, ownerGID: gid_t) {
        self.appUID = appUID
        self.appGID = appGID
        self.ownerUID = ownerUID
        self.ownerGID = ownerGID
    }

    /// The credentials the file system sees for a request's.
    func incoming(uid: uid_t, gid: gid_t) -> (uid: uid_t, gid: gid_t) {
        guard uid == appUID else { return (uid, gid) }
        return (ownerUID, gid == appGID ? ownerGID : gid)
    }

    /// A chown's target owner and group, as the host is to record them.
    func incomingChange(uid: uid_t?, gid: gid_t?) -> (uid: uid_t?, gid: gid_t?) {
        (uid.map { $0 == appUID ? ownerUID : $0 }, gid.map { $0 == appGID ? ownerGID : $0 })
    }

    /// Attributes as the app account is shown them.
    func outgoing(_ info: stat, toUID caller: uid_t) -> stat {
        guard caller == appUID else { return info }
        var shown = info
        if shown.st_uid == ownerUID { shown.st_uid = appUID }
        if shown.st_gid == ownerGID { shown.st_gid = appGID }
        return shown
    }
}

extension Bridge {
    static func alias(_ request: fuse_req_t) -> OwnerAlias? {
        BridgeContext.from(fuse_req_userdata(request)!).alias
    }

    /// Attributes about to be sent in answer to `request`.
    static func shown(_ info: stat, to request: fuse_req_t) -> stat {
        guard let alias = alias(request) else { return info }
        return alias.outgoing(info, toUID: fuse_req_ctx(request)!.pointee.uid)
    }
}
