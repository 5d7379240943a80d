import Glibc

/// The host account app processes run as (SPEC S5, docs/SECURITY.md "Who
/// an app runs as"). An app never runs as host root: when the owner is
/// root, apps run as the system account `scopefs-app`, which `make deps`,
/// `make install` and the Debian package create; otherwise as the owner.
/// The daemon decides (it alone knows whom its mount lets in) and tells
/// each `scopefs run` when it registers.
public struct AppAccount: Codable, Sendable, Equatable {
    public static let systemName = "scopefs-app"
    /// How to make the account, for messages.
    public static let creation =
        "useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "
        + systemName

    public var name: String
    public var uid: uid_t
    public var gid: gid_t

    public init(name: String, uid: uid_t, gid: gid_t) {
        self.name = name
        self.uid = uid
        self.gid = gid
    }

    /// Who apps of a daemon running as `owner` run as: the owner's own
    /// account, or for root the system account (nil when it is missing).
    public static func forOwner(_ owner: uid_t) -> AppAccount? {
        guard owner == 0 else { return lookup(uid: owner) ?? AppAccount(name: "\(owner)", uid: owner, gid: getgid()) }
        guard let account = lookup(name: systemName), account.uid != 0, account.gid != 0 else { return nil }
        return account
    }

    static func lookup(name: String) -> AppAccount? {
        guard let entry = getpwnam(name) else { return nil }
        return AppAccount(name: name, uid: entry.pointee.pw_uid, gid: entry.pointee.pw_gid)
    }

    static func lookup(uid: uid_t) -> AppAccount? {
        guard let entry = getpwuid(uid) else { return nil }
        return AppAccount(name: String(cString: entry.pointee.pw_name), uid: uid, gid: entry.pointee.pw_gid)
    }
}
