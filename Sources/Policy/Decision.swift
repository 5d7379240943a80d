/// The decision point: every operation on a provider or container item is
/// classified and checked here, so the rules of SPEC S2–S4, S9 and S14 live
/// in one place.

/// Who is asking, as established from the kernel (SPEC §1 "App process").
public enum Caller: Sendable, Equatable {
    /// A process of an app (launched by `scopefs run`, or a descendant).
    case app(AppID, ProcessKey)
    /// The mount owner's own process that is not an app process: the
    /// read-only inspect view (SPEC S4).
    case owner
    /// Anybody else (another user's process, reaching the mount only with
    /// `allow_other`): sees nothing.
    case stranger

    public var app: AppID? {
        if case .app(let app, _) = self { return app }
        return nil
    }
}

/// A process as the kernel knows it: thread-group id plus start time, so a
/// reused pid is never mistaken for the original (SPEC S36).
public struct ProcessKey: Sendable, Hashable, Codable, CustomStringConvertible {
    public var pid: Int32
    public var startTime: UInt64

    public init(pid: Int32, startTime: UInt64) {
        self.pid = pid
        self.startTime = startTime
    }

    public var description: String { "\(pid)@\(startTime)" }
}

/// What an operation does to its target, for the decision.
public enum OperationClass: Sendable {
    /// lookup and getattr: never need more than visibility (SPEC S9).
    case lookup
    /// Content read that needs a started scope in strict mode: open for
    /// reading, opendir.
    case read
    /// Reads that need an active grant but no scope: readdir on an open
    /// directory, readlink, getxattr, listxattr (not listed in SPEC S9).
    case metadata
    /// Content write: open for writing, write, create, mkdir, unlink, rmdir,
    /// rename, link, symlink, setattr, setxattr, removexattr, fallocate.
    case write
}

/// Why an operation was refused. Each has the errno SPEC S32 names.
public enum Denial: Error, Sendable, Equatable {
    /// Not granted, or another app's: ENOENT.
    case invisible
    /// Denied by the sandbox (revoked, read-only grant, bare folder): EPERM.
    case denied
    /// A write from the inspect view: EROFS (SPEC S4).
    case readOnlyView
    /// A rename or link across grants or providers: EXDEV (SPEC S32).
    case crossGrant
}

public enum Decision {
    /// Decides an operation on a provider item for an app process or the
    /// owner process. `scopeHeld` is consulted only for content operations on a
    /// granted item (the per-process security scope, SPEC S9).
    public static func provider(
        _ operation: OperationClass, coverage: Coverage, caller: Caller,
        enclosing: (Grant) -> [Grant] = { _ in [] }, scopeHeld: (Grant) -> Bool = { _ in true }
    ) -> Denial? {
        if case .failure(let denial) = permit(
            operation, coverage: coverage, caller: caller, enclosing: enclosing, scopeHeld: scopeHeld)
        {
            return denial
        }
        return nil
    }

    /// Decides an operation on a provider item and names the grant that
    /// allows it (nil outside grants). Apple's rule (SPEC S9): the item's
    /// nearest grant, or any grant enclosing it (`enclosing`, nearest first),
    /// allows the operation when it is active, grants enough access and —
    /// for content — its scope is held. So a started folder scope covers
    /// every item below it whatever deeper grants exist, and revoking one
    /// grant denies only what no other active, started grant covers.
    /// `enclosing` is asked only when the nearest grant does not allow it.
    public static func permit(
        _ operation: OperationClass, coverage: Coverage, caller: Caller,
        enclosing: (Grant) -> [Grant] = { _ in [] }, scopeHeld: (Grant) -> Bool = { _ in true }
    ) -> Result<Grant?, Denial> {
        switch caller {
        case .stranger:
            return .failure(.invisible)
        case .owner:
            switch coverage {
            case .hidden: return .failure(.invisible)
            case .ancestor: return operation == .write ? .failure(.readOnlyView) : .success(nil)
            case .granted(let grant): return operation == .write ? .failure(.readOnlyView) : .success(grant)
            }
        case .app:
            switch coverage {
            case .hidden:
                return .failure(.invisible)
            case .ancestor:
                return operation == .write ? .failure(.denied) : .success(nil)
            case .granted(let grant):
                if operation == .lookup { return .success(grant) }
                func allows(_ grant: Grant) -> Bool {
                    if grant.state != .active { return false }
                    if operation == .write && grant.access != .readWrite { return false }
                    return operation == .metadata || scopeHeld(grant)
                }
                if allows(grant) { return .success(grant) }
                if let outer = enclosing(grant).first(where: allows) { return .success(outer) }
                return .failure(.denied)
            }
        }
    }

    /// Decides an operation on an item of an app's own container: the app has
    /// full access, owner processes read (SPEC S4), nobody else sees it.
    public static func container(_ operation: OperationClass, caller: Caller) -> Denial? {
        switch caller {
        case .stranger: return .invisible
        case .owner: return operation == .write ? .readOnlyView : nil
        case .app: return nil
        }
    }

    /// Decides an operation on the synthetic folders (the mount root,
    /// `MOUNT/<app>`, `Providers/`): they can be listed, never changed.
    public static func synthetic(_ operation: OperationClass, caller: Caller) -> Denial? {
        switch caller {
        case .stranger: return .invisible
        case .owner: return operation == .write ? .readOnlyView : nil
        case .app: return operation == .write ? .denied : nil
        }
    }

    /// Whether a caller may enter `MOUNT/<app>` at all (SPEC S3).
    public static func mayEnter(app: AppID, caller: Caller) -> Bool {
        switch caller {
        case .stranger: return false
        case .owner: return true
        case .app(let own, _): return own == app
        }
    }
}
