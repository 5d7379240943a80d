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

    /// `app`, asked about without one of its processes: for the rules that
    /// hold whichever process asks, as a descriptor's operations (no scope
    /// is asked through a descriptor, S9) and the portal's layout (a
    /// Flatpak app holds no scope). No process has pid 0, so no scope is
    /// ever found for it.
    public static func anyProcess(of app: AppID) -> Caller { .app(app, ProcessKey(pid: 0, startTime: 0)) }
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

/// What an operation does to its target, for the decision. Listing is a
/// read of a folder (opendir, then readdir on its handle), creating a
/// write to the folder (create, mkdir, mknod, symlink, link).
public enum OperationClass: Sendable {
    /// lookup and getattr: never need more than visibility (SPEC S9).
    case lookup
    /// Content read: open for reading, opendir (by name, a started scope
    /// in strict mode); read, readdir, fsync of a read descriptor (through
    /// the descriptor, `Route.descriptor`: no scope).
    case read
    /// Reads by name that need an active grant but no scope: readlink,
    /// getxattr, listxattr (not listed in SPEC S9).
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

/// How an operation reaches its item (SPEC S9, S14, S47).
public enum Route: Sendable, Equatable {
    /// By name: open, opendir, create, and every request on a node that
    /// is not made through an open descriptor. Content needs a held scope
    /// in strict mode (S9).
    case name
    /// Through a descriptor (or a mapping of it) opened before: what the
    /// open allowed is asked again, without a scope — "a descriptor opened
    /// while in scope keeps working after the process's last stop" (S9) —
    /// and a denial is EPERM, never ENOENT: the descriptor's file cannot
    /// vanish, it is cut (S14).
    case descriptor
}

/// What an open descriptor was opened for: read, write or both (O_RDWR,
/// or O_RDONLY|O_TRUNC). Each of its operations asks the one decision for
/// all of it (SPEC S47), so a write descriptor is cut once no active
/// grant allows writing the file, a read descriptor once none allows
/// reading it.
public struct DescriptorAccess: OptionSet, Sendable, Hashable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let read = DescriptorAccess(rawValue: 1)
    public static let write = DescriptorAccess(rawValue: 2)

    /// The operation classes the access is asked as, read first.
    public var operations: [OperationClass] {
        var operations: [OperationClass] = []
        if contains(.read) { operations.append(.read) }
        if contains(.write) { operations.append(.write) }
        return operations
    }
}

public enum Decision {
    /// Decides an operation on a provider item for an app process or the
    /// owner process. `scopeHeld` is consulted only for content operations on a
    /// granted item (the per-process security scope, SPEC S9).
    public static func provider(
        _ operation: OperationClass, coverage: Coverage, caller: Caller, route: Route = .name,
        enclosing: (Grant) -> [Grant] = { _ in [] }, scopeHeld: (Grant) -> Bool = { _ in true }
    ) -> Denial? {
        if case .failure(let denial) = permit(
            operation, coverage: coverage, caller: caller, route: route, enclosing: enclosing, scopeHeld: scopeHeld)
        {
            return denial
        }
        return nil
    }

    /// The access rule (SPEC S47): whether `caller` may do `operation` to
    /// a provider item with `coverage` now, and the grant that allows it
    /// (nil outside grants). Every check of a provider item asks this:
    /// opens and other requests by name (`route: .name`, the gate), and
    /// every operation on an open descriptor or mapping (`route:
    /// .descriptor`, through `permitDescriptor`).
    ///
    /// Apple's rule (SPEC S9): the item's nearest grant, or any grant
    /// enclosing it (`enclosing`, nearest first), allows the operation
    /// when it is active, grants enough access (read-write for `.write`)
    /// and — for content by name — its scope is held. So a started folder
    /// scope covers every item below it whatever deeper grants exist, and
    /// revoking or narrowing one grant denies only what no other active
    /// grant allows. `enclosing` is asked only when the nearest grant does
    /// not allow it; `scopeHeld` only for content by name.
    public static func permit(
        _ operation: OperationClass, coverage: Coverage, caller: Caller, route: Route = .name,
        enclosing: (Grant) -> [Grant] = { _ in [] }, scopeHeld: (Grant) -> Bool = { _ in true }
    ) -> Result<Grant?, Denial> {
        switch caller {
        case .stranger:
            return .failure(.invisible)
        case .owner:
            switch coverage {
            case .hidden: return .failure(route == .descriptor ? .denied : .invisible)
            case .ancestor: return operation == .write ? .failure(.readOnlyView) : .success(nil)
            case .granted(let grant): return operation == .write ? .failure(.readOnlyView) : .success(grant)
            // An app's temporary is its own (S48): the inspect view never sees it.
            case .replacing: return .failure(route == .descriptor ? .denied : .invisible)
            }
        case .app:
            switch coverage {
            case .hidden:
                return .failure(route == .descriptor ? .denied : .invisible)
            case .ancestor:
                return operation == .write ? .failure(.denied) : .success(nil)
            case .granted(let grant), .replacing(let grant):
                if operation == .lookup { return .success(grant) }
                let needsScope = route == .name && operation != .metadata
                // A temporary beside a granted file (S48) is there to be
                // written and renamed over the file: any use of it is a
                // write of that file, so it needs what writing it needs.
                var asked = operation
                if case .replacing = coverage { asked = .write }
                func allows(_ grant: Grant) -> Bool {
                    if grant.state != .active { return false }
                    if asked == .write && grant.access != .readWrite { return false }
                    return !needsScope || scopeHeld(grant)
                }
                if allows(grant) { return .success(grant) }
                if let outer = enclosing(grant).first(where: allows) { return .success(outer) }
                return .failure(.denied)
            }
        }
    }

    /// The descriptor path's entry point (SPEC S14, S47): whether an open
    /// descriptor (or a mapping of it) of a provider item may still be
    /// used for what it was opened for. `permit` is asked, `route:
    /// .descriptor`, for each of `access` (all must be allowed), with the
    /// item's coverage now — the same coverage an open would see.
    ///
    /// `openedThrough`: the grant the descriptor was opened through, as the
    /// policy has it now (nil once it is gone). It stands in for the
    /// coverage only where the item's path no longer leads to a grant
    /// while that grant is still there: the item moved, or its name now
    /// names another file (issue 28's check), and the descriptor still
    /// holds the file that grant allowed. A revoke, a narrowing or a
    /// forget of that grant is then decided as for any coverage.
    public static func permitDescriptor(
        _ access: DescriptorAccess, coverage: Coverage, openedThrough: Grant?, caller: Caller,
        enclosing: (Grant) -> [Grant] = { _ in [] }
    ) -> Result<Grant?, Denial> {
        var coverage = coverage
        if case .hidden = coverage, let openedThrough { coverage = .granted(openedThrough) }
        var allowing: Grant? = nil
        for operation in access.operations {
            switch permit(operation, coverage: coverage, caller: caller, route: .descriptor, enclosing: enclosing) {
            case .failure(let denial): return .failure(denial)
            case .success(let grant): allowing = allowing ?? grant
            }
        }
        return .success(allowing)
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
