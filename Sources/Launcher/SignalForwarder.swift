import CSystemShims
import Foundation
import Glibc
import Processes
import Synchronization

/// Passes on to the app the signals a process sends `scopefs run` (SPEC
/// S5; docs/CLI.md): a `kill` of the run, a service manager's stop, the
/// scenario runner's `signal:` step (docs/SCENARIOS.md).
///
/// The app is the run's child, or, in the sandbox, the command bubblewrap
/// runs, pid 2 of the sandbox's pid namespace. Never bubblewrap: it has no
/// handler for them, so one would end it, and `--die-with-parent` would
/// end the whole sandbox with SIGKILL before the app's handler ran. The
/// launcher starts bubblewrap with these signals ignored
/// (`SandboxProfile.launcherSignals`, which gives the command their default
/// action back).
///
/// Signals the kernel sends (`SI_KERNEL`: the terminal's ^C, ^\ and
/// hangup) go to the terminal's foreground process group, the app's own
/// process included: those are not passed on a second time.
package final class SignalForwarder: Sendable {
    /// The signals passed on.
    package static let signals: [Int32] = [SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2]

    /// Where the app is.
    package enum Target: Sendable {
        /// The launcher's child itself (`--no-sandbox`).
        case child
        /// The command of the sandbox bubblewrap, the child, runs.
        case sandboxedCommand
    }

    private let child: pid_t
    private let target: Target
    private let readEnd: Int32
    private let writeEnd: Int32
    /// The app's pid once found (0 before).
    private let found = Atomic<Int32>(0)
    private let childEnded = Atomic<Bool>(false)

    /// Installs the handlers (replacing the launcher's `SIG_IGN`) and starts
    /// passing signals on from a thread of its own.
    package init(child: pid_t, target: Target) {
        var ends: [Int32] = [-1, -1]
        if pipe2(&ends, O_CLOEXEC) != 0 { ends = [-1, -1] }
        // A handler must never block: past a full pipe, signals are dropped.
        if ends[1] >= 0 { _ = fcntl(ends[1], F_SETFL, fcntl(ends[1], F_GETFL) | O_NONBLOCK) }
        (self.child, self.target, readEnd, writeEnd) = (child, target, ends[0], ends[1])
        guard readEnd >= 0 else { return }
        forwardingPipe = writeEnd
        for number in Self.signals { Self.install(number, handler: noteSignal) }
        Thread.detachNewThread { [self] in passOn() }
    }

    /// Once the child was reaped: the signals are ignored again (a late one
    /// must not change the run's exit status) and the thread ends.
    package func childDidEnd() {
        childEnded.store(true, ordering: .releasing)
        guard readEnd >= 0 else { return }
        for number in Self.signals { signal(number, SIG_IGN) }
        forwardingPipe = -1
        close(writeEnd)  // the thread reads the end of the pipe, and closes its own end
    }

    private func passOn() {
        var byte: UInt8 = 0
        while true {
            let count = read(readEnd, &byte, 1)
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { break }
            deliver(Int32(byte))
        }
        close(readEnd)
    }

    /// Sends `number` to the app, once it exists and no longer ignores it:
    /// a signal that comes while bubblewrap still builds the sandbox waits
    /// for its command, and for `env` to give the signal its default action
    /// back (an app that ignores it for good gets it after `ignoredWait`,
    /// to no effect).
    private func deliver(_ number: Int32) {
        var ignoredSince: ContinuousClock.Instant?
        while !childEnded.load(ordering: .acquiring) {
            if let app = app() {
                let ignored = ProcFS.ignoredSignals(of: app).map { $0 & (1 << UInt64(number - 1)) != 0 } ?? false
                let since = ignoredSince ?? .now
                ignoredSince = since
                if !ignored || ContinuousClock.now - since > Self.ignoredWait {
                    kill(app, number)
                    return
                }
            }
            // Nothing tells when the sandbox's init forked the command, or
            // when it exec'd past `env`: this only runs in those milliseconds.
            usleep(Self.setupPollMicroseconds)
        }
    }

    private static let ignoredWait = Duration.seconds(2)
    private static let setupPollMicroseconds: UInt32 = 2_000

    private func app() -> pid_t? {
        let known = found.load(ordering: .acquiring)
        if known != 0 { return known }
        let app: pid_t? =
            switch target {
            case .child: child
            case .sandboxedCommand: Self.sandboxedCommand(of: child)
            }
        if let app { found.store(app, ordering: .releasing) }
        return app
    }

    /// The command of the sandbox `bubblewrap` runs: bubblewrap's child is
    /// the sandbox's init, pid 1 of its pid namespace, whose first child,
    /// pid 2 there, is the command (it keeps that pid through `setpriv`,
    /// `env` and `scope exec`, which exec it). Without `--as-pid-1`, which
    /// would make the command an init, deaf to every signal it has no
    /// handler for.
    static func sandboxedCommand(of bubblewrap: pid_t) -> pid_t? {
        var parents: [pid_t: pid_t] = [:]
        for pid in ProcFS.processes() {
            if let status = ProcFS.status(of: pid) { parents[pid] = status.parent }
        }
        for (initPid, parent) in parents where parent == bubblewrap && ProcFS.innermostPid(of: initPid) == 1 {
            for (pid, parent) in parents where parent == initPid && ProcFS.innermostPid(of: pid) == 2 {
                return pid
            }
        }
        return nil
    }

    private typealias Handler =
        @convention(c) (Int32, UnsafeMutablePointer<siginfo_t>?, UnsafeMutableRawPointer?) -> Void

    private static func install(_ number: Int32, handler: @escaping Handler) {
        var action = sigaction()
        action.__sigaction_handler.sa_sigaction = handler
        action.sa_flags = SA_SIGINFO | SA_RESTART
        sigemptyset(&action.sa_mask)
        sigaction(number, &action, nil)
    }
}

/// The write end the handler notes signals in (-1: none). One run per
/// process, so one forwarder at a time.
nonisolated(unsafe) private var forwardingPipe: Int32 = -1

/// The signal handler: only async-signal-safe calls. A signal a process
/// sent (`si_code` <= 0: SI_USER, SI_QUEUE, SI_TKILL) is noted for the
/// forwarding thread; the kernel's (SI_KERNEL) reached the app already.
private func noteSignal(_ number: Int32, _ info: UnsafeMutablePointer<siginfo_t>?, _: UnsafeMutableRawPointer?) {
    guard let info, info.pointee.si_code <= 0 else { return }
    let saved = errno
    var byte = UInt8(truncatingIfNeeded: number)
    _ = write(forwardingPipe, &byte, 1)
    errno = saved
}
