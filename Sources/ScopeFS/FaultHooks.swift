import Foundation
import Glibc
import Policy
import SystemPackage

/// Fault and latency injection (issue 18): the owner's rules
/// (`FaultInjector`) make requests the policy allowed fail with an errno
/// or wait, so a developer can test an app against a failing disk as
/// against a revocation. `gate` and `checkStillGranted` call in here only
/// when a rule is set (`faults.isActive`, one relaxed load).
extension ScopeFileSystem {
    /// Applies the rules to a request that passed the gate.
    func injectFault(_ resolved: NodeTable.Resolved, _ caller: Caller, _ operation: FileOperation) throws(Errno) {
        let app = caller.app ?? resolved.node.place.app
        var pid: Int32? = nil
        if case .app(_, let process) = caller { pid = process.pid }
        try apply(
            resolved, app: app, pid: pid, operation: operation.rawValue,
            inFolder: resolved.node.isDirectory && operation.actsInFolder)
    }

    /// Applies the rules to a read, write or fsync on an open file.
    func injectFault(_ open: OpenHandle, _ operation: FileOperation) throws(Errno) {
        guard let resolved = table.resolve(open.node.inode, generation: generation) else { return }
        var app: AppID? = nil
        if case .app(let user) = open.user { app = user }
        try apply(
            resolved, app: app ?? resolved.node.place.app, pid: nil,
            operation: operation.rawValue, inFolder: false)
    }

    private func apply(_ resolved: NodeTable.Resolved, app: AppID?, pid: Int32?, operation: String, inFolder: Bool)
        throws(Errno)
    {
        let shown = displayPath(resolved)
        let effects = faults.effects(
            app: app, path: Self.pathInView(shown, app: resolved.node.place.app), operation: operation,
            inFolder: inFolder)
        let now = Date().timeIntervalSince1970
        if effects.latencyMilliseconds > 0 {
            // The request's own thread waits, as it would on a slow disk.
            events.record(
                Event(
                    time: now, kind: .fault, app: app, pid: pid, path: shown, operation: operation,
                    count: effects.latencyMilliseconds))
            usleep(UInt32(min(effects.latencyMilliseconds, FaultRule.maximumLatencyMilliseconds)) * 1000)
        }
        if let failure = effects.errno, let errno = failure.errno {
            events.record(
                Event(time: now, kind: .fault, app: app, pid: pid, path: shown, operation: operation, errno: errno))
            throw Errno(rawValue: errno)
        }
    }

    /// Before a change to an open file: while an `unsynced` rule covers
    /// it, a copy of the file as its last fsync left it (issue 48).
    func keepUnsynced(_ open: OpenHandle) {
        guard faults.tracksUnsynced, let (app, path) = ruleView(open) else { return }
        guard faults.keepsUnsynced(app: app, path: path) else { return }
        unsynced.willChange(inode: open.node.inode, descriptor: open.descriptor, app: app)
    }

    /// The same before an open that truncates `name` in `parent`.
    func keepUnsynced(truncating target: NodeTable.Resolved, _ caller: Caller, parent: Int32) {
        guard faults.tracksUnsynced else { return }
        let app = caller.app ?? target.node.place.app
        let path = Self.pathInView(displayPath(target), app: target.node.place.app)
        guard faults.keepsUnsynced(app: app, path: path) else { return }
        unsynced.willTruncate(inode: target.node.inode, parent: parent, name: target.name, app: app)
    }

    /// An open file's app and path in its view, as rules match them.
    private func ruleView(_ open: OpenHandle) -> (AppID?, String)? {
        guard let resolved = table.resolve(open.node.inode, generation: generation) else { return nil }
        var app: AppID? = nil
        if case .app(let user) = open.user { app = user }
        let viewApp = resolved.node.place.app
        return (app ?? viewApp, Self.pathInView(displayPath(resolved), app: viewApp))
    }

    /// The inodes whose cached pages a new rule on reads must drop: those
    /// of open files. Later opens bypass the page cache while the rule
    /// lasts (`open`), so every read meets it, repeats included.
    public func inodesWithOpenFiles() -> [UInt64] { table.withOpenFiles() }

    /// `/APP/Providers/local/a.txt` as the app sees it: `Providers/local/a.txt`.
    static func pathInView(_ shown: String, app: AppID?) -> String {
        guard let app else { return String(shown.drop { $0 == "/" }) }
        let prefix = "/\(app)"
        guard shown.hasPrefix(prefix) else { return shown }
        return String(shown.dropFirst(prefix.count).drop { $0 == "/" })
    }
}
