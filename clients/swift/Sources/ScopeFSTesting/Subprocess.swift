import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A child process started with posix_spawn(3), its standard output and
/// error going to files and its standard input reading /dev/null.
///
/// Files rather than pipes: nobody has to drain them for the child to make
/// progress, a daemon that a child leaves behind (`scopefs mount`) cannot
/// hold a reader open, and what was written is there to read after the
/// child ended. The child leads a process group of its own, so `kill()`
/// reaches what it started too (`scopefs run` and the app under it). This
/// type alone reaps the child: until `wait` saw it end, its pid cannot be
/// reused, so signalling it never hits another process.
final class Subprocess: Sendable {
    let pid: pid_t
    let outputPath: String
    let errorPath: String
    private let status = Mutex<Int32?>(nil)

    /// Starts `arguments[0]` (a path; with `searchPath`, a name looked up
    /// in `PATH`), with exactly `environment`.
    init(
        _ arguments: [String], environment: [String: String], outputPath: String, errorPath: String,
        searchPath: Bool = false
    ) throws(ScopeFSTestingError) {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, errorPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // Its own process group (to signal it with what it started), signals
        // at their defaults and none blocked, whatever the test runner set.
        var everySignal = sigset_t()
        sigfillset(&everySignal)
        var noSignal = sigset_t()
        sigemptyset(&noSignal)
        posix_spawnattr_setsigdefault(&attributes, &everySignal)
        posix_spawnattr_setsigmask(&attributes, &noSignal)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(
            &attributes, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))
        let argv = arguments.map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { (argv + envp).forEach { free($0) } }
        var pid: pid_t = 0
        let result =
            searchPath
            ? posix_spawnp(&pid, arguments[0], &actions, &attributes, argv, envp)
            : posix_spawn(&pid, arguments[0], &actions, &attributes, argv, envp)
        guard result == 0 else {
            throw .cannotStart(arguments[0], String(cString: strerror(result)))
        }
        self.pid = pid
        self.outputPath = outputPath
        self.errorPath = errorPath
    }

    /// The exit status once the child ended (128+N when signal N killed
    /// it, as shells say), else nil; reaps it when it has ended.
    var exitStatus: Int32? {
        status.withLock { status in
            if status == nil {
                var raw: Int32 = 0
                if waitpid(pid, &raw, WNOHANG) == pid {
                    status = Self.decode(raw)
                }
            }
            return status
        }
    }

    /// Waits for the end of the child, at most `timeout`; nil if it still runs.
    func wait(timeout: Duration) -> Int32? {
        let deadline = ContinuousClock.now + timeout
        var pause = Duration.milliseconds(1)
        while true {
            if let status = exitStatus { return status }
            if ContinuousClock.now >= deadline { return nil }
            Self.sleep(pause)
            pause = min(pause * 2, .milliseconds(20))
        }
    }

    /// Sends SIGKILL to the child's process group unless it has been
    /// reaped, then reaps it.
    func kill() {
        status.withLock { status in
            guard status == nil else { return }
            signalGroup(pid, SIGKILL)
            var raw: Int32 = 0
            while waitpid(pid, &raw, 0) == -1 && errno == EINTR {}
            status = Self.decode(raw)
        }
    }

    /// What the child wrote on standard output so far.
    var output: Data { FileManager.default.contents(atPath: outputPath) ?? Data() }
    /// What the child wrote on standard error so far.
    var errorOutput: Data { FileManager.default.contents(atPath: errorPath) ?? Data() }

    static func sleep(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        var request = timespec(tv_sec: Int(seconds), tv_nsec: Int(attoseconds / 1_000_000_000))
        var remaining = timespec()
        while nanosleep(&request, &remaining) == -1 && errno == EINTR { request = remaining }
    }

    private static func decode(_ raw: Int32) -> Int32 {
        let signal = raw & 0x7f
        return signal == 0 ? (raw >> 8) & 0xff : 128 + signal
    }
}

/// kill(2) on a process group (a free function: `Subprocess.kill` hides the name).
private func signalGroup(_ leader: pid_t, _ signal: Int32) {
    _ = kill(-leader, signal)
}
