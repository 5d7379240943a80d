import FuseBridge
import Glibc
import Policy
import Processes
import ScopeFS
import Synchronization

/// Knows which processes belong to which app, and who each FUSE request
/// comes from (SPEC §1 "App process", S5, S36).
///
/// An app's tree starts at the process that registered over the control
/// socket (`scopefs run`); every process forked from an app process joins
/// the app, whatever happens to its parent later (double forks, daemons).
/// Identities are cached per thread and dropped when the kernel reports the
/// thread's exit, so the hot path costs one dictionary lookup.
public final class ProcessTracker: CallerResolver {
    public struct AppProcess: Sendable {
        public var key: ProcessKey
        public var app: AppID
        /// The app process that forked it (nil for the registered root).
        public var parent: Int32?
    }

    /// A thread's identity as last read from /proc, with what tells that
    /// the thread may no longer be the one it was taken from.
    private struct CachedCaller {
        var caller: Caller
        /// The request's uid then: a request with another uid is read again
        /// (a reused thread id of another user, a setuid).
        var uid: uid_t
    }

    private struct State {
        var processes: [Int32: AppProcess] = [:]
        /// By thread ID: every request looks its caller up here.
        var callers: [NumberKey<Int32>: CachedCaller] = [:]
        /// The cached thread IDs of each process, dropped together when the
        /// process execs: an exec from a non-leader thread gives that thread
        /// the leader's ID and reports no exit for its old one (SPEC S5).
        var cachedThreads: [NumberKey<Int32>: [Int32]] = [:]

        mutating func forgetThread(_ thread: Int32) {
            callers[thread] = nil
        }

        mutating func forgetThreads(of process: Int32) {
            callers[process] = nil
            for thread in cachedThreads.removeValue(forKey: NumberKey(process)) ?? [] { callers[thread] = nil }
        }
    }

    private let state = Mutex(State())
    private let connector: ProcConnector?
    /// The runs' cgroups: attribution the kernel keeps. nil without a
    /// writable cgroup2 hierarchy, where fork events are followed instead.
    private let cgroups: AppCgroups?
    /// Serialises reading the connector: events must be applied in order.
    private let connectorLock = Mutex(())
    private let ownerUID: uid_t
    private let exitHandlers = Mutex<[@Sendable (AppProcess) -> Void]>([])
    /// Where runs are recorded for the next daemon (nil: not recorded).
    private let journal: RunJournal?
    private let mountpoint: String
    /// The runs of a previous daemon still running on its dead mount.
    let stranded: StrandedRuns?

    init(ownerUID: uid_t, journal: RunJournal? = nil, mountpoint: String = "") {
        self.ownerUID = ownerUID
        self.connector = ProcConnector()
        let cgroups = AppCgroups()
        self.cgroups = cgroups
        self.journal = journal
        self.mountpoint = mountpoint
        self.stranded = journal.map { StrandedRuns(journal: $0, cgroups: cgroups) }
    }

    /// How app processes are told apart, for `scopefs status`.
    public var attribution: String {
        if let cgroups { return "cgroup v2 (\(cgroups.mountPath)\(cgroups.base))" }
        return connector != nil
            ? "process events (no writable cgroup v2)" : "/proc parents (no cgroup v2, no process events)"
    }

    /// Removes the cgroups (and journal records) of finished runs.
    public func removeFinishedRuns() {
        for leaf in cgroups?.removeEmpty() ?? [] { journal?.remove(named: leaf) }
    }

    /// `handler` is told about every app process that ends (leak reports,
    /// import inboxes).
    public func onExit(_ handler: @escaping @Sendable (AppProcess) -> Void) {
        exitHandlers.withLock { $0.append(handler) }
    }

    /// `pid` followed by its ancestors in its app's process tree (for scope
    /// inheritance, SPEC S9).
    public func lineage(of pid: Int32) -> [Int32] {
        state.withLock { state in
            var chain: [Int32] = []
            chain.reserveCapacity(8)  // one allocation for a usual process tree
            chain.append(pid)
            var current = state.processes[pid]?.parent
            while let parent = current, chain.count < 64 {
                chain.append(parent)
                current = state.processes[parent]?.parent
            }
            return chain
        }
    }

    /// Whether fork/exit events are followed (else identities are checked
    /// against /proc on every request).
    public var followsEvents: Bool { connector != nil }

    // MARK: Requests

    public func caller(of request: Request) -> Caller {
        let thread = request.threadID
        guard thread > 0 else { return .stranger }
        if connector != nil, let cached = state.withLock({ $0.callers[thread] }), cached.uid == request.uid {
            return cached.caller
        }
        return resolve(thread: thread, uid: request.uid)
    }

    private func resolve(thread: Int32, uid: uid_t) -> Caller {
        guard let status = ProcFS.status(of: thread), let key = ProcFS.key(of: status.tgid) else { return .stranger }
        applyPendingEvents()
        let caller: Caller
        if let app = appOf(key, status: status, thread: thread) {
            caller = .app(app, key)
        } else {
            caller = status.uid == ownerUID && uid == ownerUID ? .owner : .stranger
        }
        if connector != nil {
            state.withLock { state in
                if state.callers.count > 200_000 {
                    state.callers.removeAll()
                    state.cachedThreads.removeAll()
                }
                state.callers[thread] = CachedCaller(caller: caller, uid: uid)
                state.cachedThreads[NumberKey(status.tgid), default: []].append(thread)
            }
        }
        return caller
    }

    /// The app of a process: its run's cgroup where runs have cgroups, else
    /// known from the fork events or found by walking up its parents.
    private func appOf(_ key: ProcessKey, status: ProcFS.Status, thread: Int32) -> AppID? {
        guard let cgroups else { return appOf(key, parent: status.parent) }
        guard let app = cgroups.app(of: thread) else { return nil }
        // Known to the tree (scope inheritance, leaks, status) from now on,
        // even when no fork event named it (clone with CLONE_PARENT reports
        // the caller's parent as the parent).
        state.withLock { state in
            if state.processes[key.pid] == nil {
                let parent = state.processes[status.parent]?.app == app ? status.parent : nil
                state.processes[key.pid] = AppProcess(key: key, app: app, parent: parent)
            }
        }
        return app
    }

    /// Without cgroups: known from the fork events, or found by walking up
    /// its parents to a known app process.
    private func appOf(_ key: ProcessKey, parent: Int32) -> AppID? {
        if let known = state.withLock({ $0.processes[key.pid] }),
            known.key.startTime == key.startTime || known.key.startTime == 0
        {
            return known.app
        }
        var ancestor = parent
        for _ in 0..<64 where ancestor > 1 {
            if let known = state.withLock({ $0.processes[ancestor] }), let ancestorKey = ProcFS.key(of: ancestor),
                known.key.startTime == ancestorKey.startTime || known.key.startTime == 0
            {
                let joined = AppProcess(key: key, app: known.app, parent: ancestor)
                state.withLock { $0.processes[key.pid] = joined }
                return known.app
            }
            guard let status = ProcFS.status(of: ancestor) else { break }
            ancestor = status.parent
        }
        return nil
    }

    // MARK: Registration

    /// Makes `pid` the root of a new app process tree. Refused when the
    /// process already is an app process (SPEC S5).
    public func register(pid: Int32, app: AppID) -> Result<ProcessKey, RegistrationError> {
        guard let key = ProcFS.key(of: pid), let status = ProcFS.status(of: pid) else { return .failure(.gone) }
        applyPendingEvents()
        // Either sign is enough: a process in a run's cgroup, or one the fork
        // events tie to an app process.
        if let existing = appOf(key, status: status, thread: pid) ?? appOf(key, parent: status.parent) {
            return .failure(.alreadyApp(existing))
        }
        removeFinishedRuns()
        var leaf: String?
        if let cgroups {
            leaf = cgroups.place(pid: pid, app: app)
            if leaf == nil { return .failure(.noCgroup) }
        }
        state.withLock { state in
            state.processes[pid] = AppProcess(key: key, app: app, parent: nil)
            // Its threads may have been cached as an owner process before.
            state.callers = state.callers.filter { $0.value.caller.app != nil }
        }
        // Written once the run is known here: a process that saw the
        // record (`CallerIdentity`'s registration watch drops what it
        // cached as the owner's then) is answered as the app from then on.
        journal?.write(
            RunJournal.Record(daemon: getpid(), app: app, launcher: key, cgroup: leaf, mountpoint: mountpoint))
        return .success(key)
    }

    public enum RegistrationError: Error {
        case alreadyApp(AppID)
        case gone
        /// The run's cgroup could not be made or joined.
        case noCgroup
    }

    /// What the attribution FUSE requests are served by says of a process
    /// or thread: the answer `CallerIdentity` decides with, in the daemon
    /// and (through the control socket's `identify`) in the owner's other
    /// processes. A process that is gone cannot be told (fail closed).
    package func attribution(of pid: Int32) -> CallerIdentity.Attribution {
        guard let status = ProcFS.status(of: pid), let key = ProcFS.key(of: status.tgid) else {
            return .unknown("process \(pid) is gone")
        }
        applyPendingEvents()
        return appOf(key, status: status, thread: pid).map { .app($0) } ?? .notApp
    }

    /// Live app processes, for `scopefs status`.
    public var appProcesses: [AppProcess] {
        state.withLock { Array($0.processes.values) }.sorted { $0.key.pid < $1.key.pid }
    }

    /// Every live process of `app`: its runs' cgroups hold them all (the
    /// sandbox's own processes too); without cgroups, those followed.
    public func processes(of app: AppID) -> [Int32] {
        let followed = state.withLock { $0.processes.values.filter { $0.app == app }.map(\.key.pid) }
        return Array(Set(followed + (cgroups?.processes(of: app) ?? []))).sorted()
    }

    // MARK: Events

    /// Runs until `stop` says so, applying fork and exit events as they come.
    public func follow(until stop: @Sendable () -> Bool) {
        guard let connector else { return }
        while !stop() {
            if connector.wait(timeoutMilliseconds: DaemonTunables.processEventWaitMilliseconds) { applyPendingEvents() }
        }
    }

    private func applyPendingEvents() {
        guard let connector else { return }
        connectorLock.withLock { _ in
            connector.drain { event in apply(event) }
        }
    }

    private func apply(_ event: ProcConnector.Event) {
        switch event {
        case .fork(let parentTGID, let childPID, let childTGID):
            guard childPID == childTGID else { return }  // a new thread, not a process
            state.withLock { state in
                guard let parent = state.processes[parentTGID] else { return }
                // Start time 0: learned from the event, validated by the exit event.
                state.processes[childTGID] = AppProcess(
                    key: ProcessKey(pid: childTGID, startTime: 0), app: parent.app, parent: parentTGID)
            }
        case .exec(let tgid):
            // A new program: whatever was cached of the process's threads
            // (including a non-leader thread's old ID) is read again.
            state.withLock { $0.forgetThreads(of: tgid) }
        case .exit(let pid, let tgid):
            let ended: AppProcess? = state.withLock { state in
                state.forgetThread(pid)
                guard pid == tgid else { return nil }
                state.forgetThreads(of: tgid)
                return state.processes.removeValue(forKey: tgid)
            }
            if let ended {
                if cgroups == nil, ended.parent == nil {
                    journal?.remove(
                        named: RunJournal.Record(
                            daemon: getpid(), app: ended.app, launcher: ended.key, cgroup: nil, mountpoint: mountpoint
                        ).name)
                }
                for handler in exitHandlers.withLock({ $0 }) { handler(ended) }
            }
        case .overflow:
            // Events were lost: forget every cached identity; they are
            // re-established from /proc (parents) on the next request.
            state.withLock { state in
                state.callers.removeAll()
                state.cachedThreads.removeAll()
            }
        }
    }
}
