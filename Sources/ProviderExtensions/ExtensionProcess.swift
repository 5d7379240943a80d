import CSystemShims
import Glibc

/// The extension's process: started with three pipes, in a session (and
/// so a process group) of its own, signalled as a group, reaped by a
/// thread of its own.
///
/// A pid is only signalled while the process is known not to be reaped:
/// the reaper waits with WNOWAIT, and reaps under the lock that `signal`
/// takes, so a signal can never reach a stranger that reused the pid.
final class ExtensionProcess: Sendable {
    let pid: pid_t
    /// The daemon's ends: stdin to write (non-blocking), stdout and stderr
    /// to read. Closed by `closeDescriptors` once the threads are done.
    let input: Int32
    let output: Int32
    let errors: Int32

    private struct State {
        /// Set once reaped: no signal is sent after.
        var status: ExtensionEvent.ExitStatus?
        var inputClosed = false
    }

    private let state = Monitored(State())

    private init(pid: pid_t, input: Int32, output: Int32, errors: Int32) {
        self.pid = pid
        self.input = input
        self.output = output
        self.errors = errors
    }

    /// Starts `arguments` (the first is a path or a name looked up on
    /// PATH) with exactly `environment`. Nothing of the daemon's other
    /// descriptors is inherited but `inherited`, which the child finds at
    /// descriptor 3 (the sandbox's seccomp filter).
    static func spawn(_ arguments: [String], environment: [String: String], inherited: Int32? = nil)
        throws(SpawnError) -> ExtensionProcess
    {
        guard let program = arguments.first, !program.isEmpty else { throw SpawnError("no command") }
        guard let executable = ExecutableSearch.find(program, path: environment["PATH"]) else {
            throw SpawnError("\(program): no such executable")
        }
        var pipes: [[Int32]] = []
        defer { for pair in pipes { for descriptor in pair where descriptor >= 0 { close(descriptor) } } }
        for _ in 0..<3 {
            var pair: [Int32] = [-1, -1]
            guard pipe2(&pair, O_CLOEXEC) == 0 else { throw SpawnError("pipe: \(String(cString: strerror(errno)))") }
            pipes.append(pair)
        }
        // stdin's write end, stdout's and stderr's read ends stay here.
        let childEnds = [pipes[0][0], pipes[1][1], pipes[2][1]]
        let pid = try launch(executable, arguments, environment, childEnds + (inherited.map { [$0] } ?? []))
        for descriptor in childEnds { close(descriptor) }
        let process = ExtensionProcess(pid: pid, input: pipes[0][1], output: pipes[1][0], errors: pipes[2][0])
        pipes = []
        _ = fcntl(process.input, F_SETFL, fcntl(process.input, F_GETFL) | O_NONBLOCK)
        return process
    }

    private static func launch(
        _ executable: String, _ arguments: [String], _ environment: [String: String], _ childEnds: [Int32]
    ) throws(SpawnError) -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for (target, descriptor) in childEnds.enumerated() {
            posix_spawn_file_actions_adddup2(&actions, descriptor, Int32(target))
        }
        posix_spawn_file_actions_addclosefrom_np(&actions, Int32(childEnds.count))
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // Default dispositions and no blocked signal: the daemon's threads
        // block or ignore some (SIGPIPE), and a child inherits both.
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigdefault(&attributes, &all)
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setflags(
            &attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK) | scopefs_posix_spawn_setsid)
        let argv = arguments.map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for pointer in argv + envp { free(pointer) } }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        guard result == 0 else { throw SpawnError("\(executable): \(String(cString: strerror(result)))") }
        return pid
    }

    /// Sends `signal` to the process's group (the extension and whatever it
    /// started), unless it has been reaped already.
    func signal(_ signal: Int32) {
        state.withLock { state in
            guard state.status == nil else { return }
            _ = kill(-pid, signal)
        }
    }

    /// Blocks until the process ends, reaps it and kills what is left of
    /// its group. Run by the reaper thread only.
    func reap() -> ExtensionEvent.ExitStatus {
        var info = siginfo_t()
        while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) != 0 && errno == EINTR {}
        return state.withLock { state in
            // A zombie still holds its pid and group id: neither can name
            // another process yet.
            _ = kill(-pid, SIGKILL)
            var raw: Int32 = 0
            while waitpid(pid, &raw, 0) < 0 && errno == EINTR {}
            let ended: ExtensionEvent.ExitStatus =
                raw & 0x7F == 0 ? .code((raw >> 8) & 0xFF) : .signal(raw & 0x7F)
            state.status = ended
            self.state.broadcast()
            return ended
        }
    }

    /// The exit status once reaped, waiting at most until `deadline`.
    func waitForExit(until deadline: UInt64) -> ExtensionEvent.ExitStatus? {
        state.withLock(waitingUntil: deadline, for: { $0.status != nil }) { $0.status }
    }

    var exitStatus: ExtensionEvent.ExitStatus? { state.withLock { $0.status } }

    /// Ends the extension's stdin (it reads end of file). The writer thread
    /// calls it after `exit`.
    func closeInput() {
        state.withLock { state in
            guard !state.inputClosed else { return }
            state.inputClosed = true
            close(input)
        }
    }

    /// Once no thread uses them any more.
    func closeDescriptors() {
        closeInput()
        close(output)
        close(errors)
    }
}

struct SpawnError: Error {
    var reason: String
    init(_ reason: String) { self.reason = reason }
}

/// `execvp`'s search, done before the spawn so that a missing program is a
/// clear reason rather than a child that exits 127.
enum ExecutableSearch {
    static func find(_ program: String, path: String?) -> String? {
        if program.contains("/") { return isExecutable(program) ? program : nil }
        let folders = (path ?? "/usr/local/bin:/usr/bin:/bin").split(separator: ":")
        return folders.map { "\($0)/\(program)" }.first(where: isExecutable)
    }

    static func isExecutable(_ path: String) -> Bool {
        var status = stat()
        return stat(path, &status) == 0 && status.st_mode & S_IFMT == S_IFREG && access(path, X_OK) == 0
    }
}
