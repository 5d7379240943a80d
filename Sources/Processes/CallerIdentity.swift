import Foundation
import Glibc
import Policy
import PolicyStore
import Synchronization

/// The one answer to "who is calling" (SPEC S5, S45, S46; issue 46,
/// finding 2): whether a peer — a control-socket connection, a D-Bus
/// caller of the portal (behind an app's `xdg-dbus-proxy` or not), a FUSE
/// request of the portal's document layout, a settings-page connection —
/// is one of the owner's own processes, a process of an app's run (and
/// which app), another user's, or a process whose identity cannot be
/// established. Every such check asks this type; none reads cgroups or
/// sandbox files of a peer itself (Tests/repo/test_one_caller_identity.py).
///
/// Which app a process is of is the daemon's attribution, the one its FUSE
/// requests are served by (`ProcessTracker`): the run's cgroup where the
/// daemon can make cgroups (root, or a delegated cgroup), otherwise the
/// fork events of the proc connector, which tie every process forked under
/// a registered `scopefs run` to its app. A non-root owner's runs have no
/// cgroup, so only the daemon knows them: processes other than the daemon
/// (`scopefs portal`, `scopefs settings`) ask it over the control socket
/// (`identify`). The proxy of `scopefs run --portal-bus` is started by the
/// run after it registered, so it is one of the run's processes, and the
/// portal's D-Bus caller is that run's app.
///
/// Two kernel signs are checked whatever the daemon says, so that a process
/// it does not know (another mount's run, a run whose daemon is gone, a
/// Flatpak sandbox) is never taken for the owner: a cgroup that is a run's
/// leaf (`AppCgroups.leafPrefix`), and a sandbox's `/.flatpak-info` (the
/// app id ScopeFS's sandboxes, their bus proxies' and Flatpak's carry).
/// Fail closed: where the identity cannot be established (the process is
/// gone, the daemon cannot answer, the signs disagree) the answer is
/// `.unknown`, which no caller treats as the owner.
package final class CallerIdentity: Sendable {
    /// What the daemon's attribution says of a process.
    package enum Attribution: Equatable, Sendable {
        case app(AppID)
        /// A live process of no app's run.
        case notApp
        /// It cannot be told (the process is gone, the daemon failed).
        case unknown(String)

        package var app: AppID? {
            if case .app(let app) = self { return app }
            return nil
        }
    }

    /// Where the daemon's attribution comes from.
    package enum Source: Sendable {
        /// In the daemon: its process tracker.
        case tracker(@Sendable (Int32) -> Attribution)
        /// In another of the owner's processes: the daemon serving the
        /// state directory, over its control socket. The closure answers
        /// the app (nil: a process of no app), fails when the daemon could
        /// not answer, and is nil when no daemon serves the state directory
        /// (then no run of it can be live but a stranded one, which the
        /// cgroup sign shows). `registrations` lets answers be kept (see
        /// `RegistrationWatch`); without it every question is asked.
        case daemon(@Sendable (Int32) -> Result<AppID?, any Error>?, registrations: RegistrationWatch?)
    }

    /// Who a peer is.
    package enum Peer: Equatable, Sendable {
        /// One of the owner's own processes (not an app's).
        case owner
        /// A process of `app`'s run (its sandbox, its bus proxy, anything
        /// it started).
        case app(AppID)
        /// A process of a user that is neither the owner nor the app
        /// account (or the app account outside every run).
        case otherUser(uid_t)
        /// Could be an app process, but which one cannot be established:
        /// refused wherever the owner alone is served.
        case unknown(String)

        package var isOwner: Bool { self == .owner }
        package var app: AppID? {
            if case .app(let app) = self { return app }
            return nil
        }

        /// Why a peer that is not the owner's own is refused, for messages.
        package var description: String {
            switch self {
            case .owner: "the owner's process"
            case .app(let app): "an app process of \(app)"
            case .otherUser(let uid): "a process of another user (uid \(uid))"
            case .unknown(let reason): "a process whose app cannot be established (\(reason))"
            }
        }
    }

    private let source: Source
    /// The uids that act as the owner (the owner; for the control socket,
    /// root too).
    private let ownerUIDs: Set<uid_t>
    /// The account apps run as when it is not the owner's (a root
    /// owner's `scopefs-app`): its processes are apps' or strangers.
    private let appUIDs: Set<uid_t>
    /// The daemon's answers, kept (`.daemon` only; a question costs a
    /// control-socket round trip). A process's app never changes while it
    /// lives, and a key holds its start time, so app answers are kept; a
    /// "no app" answer only for the registration stamp it was given under
    /// and at most `notAppLifetime` seconds.
    private let kept = Mutex<(apps: [ProcessKey: AppID], notApps: [ProcessKey: (RegistrationWatch.Stamp, Double)])>(
        ([:], [:]))
    static let notAppLifetime = 2.0
    static let keptLimit = 4096

    package init(source: Source, ownerUIDs: Set<uid_t> = [geteuid()], appUIDs: Set<uid_t> = []) {
        self.source = source
        self.ownerUIDs = ownerUIDs
        self.appUIDs = appUIDs.subtracting(ownerUIDs)
    }

    /// Who process (or thread) `pid` is, whose credentials the kernel gave
    /// with `uid` (SO_PEERCRED, the bus's, a FUSE request's).
    package func identify(pid: Int32, uid: uid_t) -> Peer {
        guard ownerUIDs.contains(uid) || appUIDs.contains(uid) else { return .otherUser(uid) }
        guard pid > 0 else { return .unknown("the kernel named no process") }
        let before = ProcFS.startTime(of: pid)
        guard before != nil else { return .unknown("process \(pid) is gone") }
        let attribution = daemonAttribution(of: ProcessKey(pid: pid, startTime: before!))
        // The process asked about must still be the one the daemon
        // answered for (its pid not reused meanwhile).
        guard ProcFS.startTime(of: pid) == before else { return .unknown("process \(pid) is gone") }
        // (For a kept answer the daemon was asked about this very process
        // before: its key holds the start time.)
        let sandboxApp = Self.sandboxApp(of: pid)
        let inRun = inRunCgroup(pid)
        switch attribution {
        case .app(let app):
            if let named = sandboxApp, named != app {
                return .unknown("a process of \(app) whose sandbox names \(named)")
            }
            return .app(app)
        case .unknown(let reason):
            return .unknown(reason)
        case nil where inRun || sandboxApp != nil:
            return .unknown("no daemon serves this state directory to tell its app")
        case .notApp where inRun:
            return .unknown("a process of a run this daemon does not know")
        case .notApp where sandboxApp != nil:
            return .unknown("a sandbox of \(sandboxApp!) that no run of this daemon holds")
        case .notApp, nil:
            return ownerUIDs.contains(uid) ? .owner : .otherUser(uid)
        }
    }

    /// The app of `pid` by the daemon's attribution; nil when no daemon
    /// serves the state directory.
    private func daemonAttribution(of key: ProcessKey) -> Attribution? {
        switch source {
        case .tracker(let attribution):
            return attribution(key.pid)
        case .daemon(let ask, let registrations):
            // Taken before asking: a run registered after this is seen by
            // the next stamp, so the answer is never kept past it.
            let stamp = registrations?.stamp()
            let now = Self.now()
            let known: AppID?? = kept.withLock { kept in
                if let app = kept.apps[key] { return .some(app) }
                if let stamp, let (given, at) = kept.notApps[key], given == stamp, now - at < Self.notAppLifetime {
                    return .some(nil)
                }
                return nil
            }
            if let known { return known.map { .app($0) } ?? .notApp }
            switch ask(key.pid) {
            case nil:
                return nil
            case .success(let app?):
                kept.withLock { kept in
                    if kept.apps.count >= Self.keptLimit { kept.apps.removeAll() }
                    kept.apps[key] = app
                }
                return .app(app)
            case .success(nil):
                if let stamp {
                    kept.withLock { kept in
                        if kept.notApps.count >= Self.keptLimit { kept.notApps.removeAll() }
                        kept.notApps[key] = (stamp, now)
                    }
                }
                return .notApp
            case .failure(let error):
                return .unknown("the daemon could not tell: \(error)")
            }
        }
    }

    private static func now() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }

    /// Whether the thread's cgroup is a run's leaf (or below one), of any
    /// daemon: the kernel's own record that it was started under a run.
    private func inRunCgroup(_ pid: Int32) -> Bool {
        guard let path = ProcFS.cgroup2Path(of: String(pid)) else { return false }
        return path.split(separator: "/").contains { $0.hasPrefix(AppCgroups.leafPrefix) }
    }

    /// The app id in `/.flatpak-info` of the thread's root: ScopeFS's app
    /// sandboxes and bus proxies bind it read-only (as Flatpak does); on
    /// the host there is none.
    private static func sandboxApp(of pid: Int32) -> AppID? {
        // Read raw: on the host the file is missing, the usual answer, and
        // Foundation's error for it costs more than the read.
        let descriptor = open("/proc/\(pid)/root/.flatpak-info", O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var bytes = [UInt8](repeating: 0, count: 4096)
        let count = bytes.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        let text = String(decoding: bytes.prefix(max(count, 0)), as: UTF8.self)
        var group = ""
        for line in text.split(separator: "\n") {
            if line.hasPrefix("[") { group = String(line) }
            if group == "[Application]", line.hasPrefix("name=") { return String(line.dropFirst(5)) }
        }
        // A sandbox's file that names no app is still a sandbox's.
        return ""
    }
}

/// Tells `CallerIdentity` when a run may have registered with the daemon
/// serving a state directory, so that the answers "no app" it keeps are
/// dropped then: a process becomes an app process only by registering
/// (`scopefs run`: the launcher, then what it execs), and the daemon writes
/// the run's journal record (`STATE/runs/`) once the run is known to it.
/// The stamp changes with every event in that folder (inotify) and with
/// the daemon's control socket (another daemon). nil when it cannot be
/// told (the watch failed or was lost): then nothing "no app" is kept.
package final class RegistrationWatch: Sendable {
    package struct Stamp: Equatable, Sendable {
        var events: UInt64
        /// The control socket's inode and change time: a new daemon's.
        var socket: UInt64
        var socketChanged: timespec

        package static func == (left: Stamp, right: Stamp) -> Bool {
            left.events == right.events && left.socket == right.socket
                && left.socketChanged.tv_sec == right.socketChanged.tv_sec
                && left.socketChanged.tv_nsec == right.socketChanged.tv_nsec
        }
    }

    private let descriptor: Int32
    private let socketPath: String
    private let state = Mutex<(events: UInt64, lost: Bool)>((0, false))

    package init?(state: StateDirectory) {
        let journal = RunJournal(state: state).directory
        socketPath = state.controlSocketPath
        descriptor = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard descriptor >= 0 else { return nil }
        let events = UInt32(IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE | IN_DELETE_SELF | IN_MOVE_SELF)
        guard inotify_add_watch(descriptor, journal, events) >= 0 else {
            close(descriptor)
            return nil
        }
    }

    deinit { close(descriptor) }

    /// The current stamp, after every event queued so far; nil once the
    /// watch is lost (its folder removed or moved, events overflowed).
    package func stamp() -> Stamp? {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let (events, lost) = state.withLock { state -> (UInt64, Bool) in
            while true {
                let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
                guard count > 0 else { break }
                state.events += 1
                var offset = 0
                while offset + MemoryLayout<inotify_event>.size <= count {
                    let event = buffer.withUnsafeBytes {
                        $0.loadUnaligned(fromByteOffset: offset, as: inotify_event.self)
                    }
                    let gone = UInt32(IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED | IN_Q_OVERFLOW)
                    if event.mask & gone != 0 { state.lost = true }
                    offset += MemoryLayout<inotify_event>.size + Int(event.len)
                }
            }
            return (state.events, state.lost)
        }
        guard !lost else { return nil }
        var info = stat()
        guard stat(socketPath, &info) == 0 else { return nil }
        return Stamp(events: events, socket: UInt64(info.st_ino), socketChanged: info.st_ctim)
    }
}
