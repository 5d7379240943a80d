import FuseBridge
import Policy
import SystemPackage

/// Who may use an open file (SPEC S33 amended: "An open file answers only
/// processes of the app that opened it"). A descriptor can leave its app —
/// passed over a unix socket, taken with `pidfd_getfd`, inherited by a
/// process that is not in the app's tree — and the kernel then sends that
/// process's reads and writes with the opener's file handle.
enum FileUser: Sendable, Hashable {
    /// Any process of this app.
    case app(AppID)
    /// The owner's processes that are not app processes: the read-only
    /// inspect view (SPEC S4) is their own "app". An owner process may not read
    /// through an app's descriptor, nor an app through an owner process's.
    case owner
    /// Nobody (a stranger's open, which the gate refuses anyway).
    case nobody

    init(_ caller: Caller) {
        switch caller {
        case .app(let app, _): self = .app(app)
        case .owner: self = .owner
        case .stranger: self = .nobody
        }
    }

    /// The caller the access rule is asked for on the descriptor's
    /// operations (`checkStillGranted`): the opener's app, with no process —
    /// through a descriptor no scope is asked (SPEC S9), and the kernel's
    /// writeback of a shared mapping comes from none (`checkUser`).
    var caller: Caller {
        switch self {
        case .app(let app): .anyProcess(of: app)
        case .owner: .owner
        case .nobody: .stranger
        }
    }

    /// The app ID compares its storage first: the tracker hands every
    /// request of an app the same string, so this is nearly always one
    /// pointer comparison.
    func admits(_ caller: Caller) -> Bool {
        switch (self, caller) {
        case (.app(let opener), .app(let app, _)): opener == app
        case (.owner, .owner): true
        default: false
        }
    }
}

extension ScopeFileSystem {
    /// Refuses a data operation (read, write, fsync, fallocate,
    /// copy_file_range, setattr through the descriptor) on an open file by
    /// a process outside the app that opened it: EPERM.
    ///
    /// Cost: one lookup in the process tracker's per-thread cache (a
    /// dictionary under its mutex) per read or write, which these did not
    /// make before; the gated operations already paid it.
    ///
    /// A request without a thread (id 0) cannot be attributed: the kernel
    /// sends the writeback of a shared mapping's dirty pages that way, with
    /// no process behind it. It is let through.
    ///
    /// Not covered: pages the kernel already caches (`keep_cache`) are read
    /// without asking the daemon, so a process handed the descriptor reads
    /// those, and can dirty them through a shared mapping (written back as
    /// above). Closing that would take direct I/O for every open, costing
    /// every app the page cache (SPEC S37).
    func checkUser(
        _ open: OpenHandle, _ request: Request, _ operation: FileOperation, _ known: Caller? = nil
    ) throws(Errno) {
        guard request.threadID != 0 else { return }
        let caller = known ?? callers.caller(of: request)
        guard open.user.admits(caller) else {
            // A denial is an event (SPEC S29); the node is looked up only now.
            if let resolved = table.resolve(open.node.inode, generation: generation) {
                recordDenial(.notPermitted, resolved, caller, operation)
            }
            throw .notPermitted
        }
    }
}
