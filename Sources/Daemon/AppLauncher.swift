import CSystemShims
import Foundation
import Glibc
import PolicyStore

/// Starts a command as an app process (SPEC S5): registers this process
/// with the daemon as the root of the app's process tree, enters the app's
/// view of the mount (`MountView`), then spawns the command and returns its
/// exit status.
public enum AppLauncher {
    public static func run(app: String, command: [String], view: MountView, state: StateDirectory) throws(ScopeFSError)
        -> Int32
    {
        let response = try ControlClient.send(ControlRequest(op: .register, app: app), state: state)
        guard response.ok, let mountpoint = response.mountpoint else {
            throw ScopeFSError(
                ScopeFSError.Kind(rawValue: response.code ?? 70) ?? .internalError, response.message ?? "registration failed")
        }
        var environment = ProcessInfo.processInfo.environment
        environment["SCOPEFS_APP"] = app
        // Client libraries find the control socket (bookmark resolution) here.
        environment["SCOPEFS_STATE"] = state.path
        environment["SCOPEFS_MOUNT"] = mountpoint + "/" + app
        var directory: String? = nil
        let entered = try MountView.enter(view, app: app, mountpoint: mountpoint)
        environment["SCOPEFS_VIEW"] = "\(entered)"
        if entered == .sandbox {
            environment["HOME"] = MountView.sandboxPath + "/Container"
            environment["SCOPEFS_MOUNT"] = MountView.sandboxPath
            directory = MountView.sandboxPath + "/Container"
        }
        return try spawnAndWait(command, environment: environment, directory: directory)
    }

    private static func spawnAndWait(_ command: [String], environment: [String: String], directory: String?)
        throws(ScopeFSError) -> Int32
    {
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var defaults = sigset_t()
        sigfillset(&defaults)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attributes, &empty)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if let directory { posix_spawn_file_actions_addchdir_np(&actions, directory) }

        let argv = command.map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        // The terminal's signals reach the child directly; forward the rest.
        let forwarded = [SIGTERM, SIGHUP, SIGINT, SIGQUIT]
        forwarded.forEach { signal($0, SIG_IGN) }
        var child: pid_t = 0
        let result = posix_spawnp(&child, command[0], &actions, &attributes, argv, envp)
        guard result == 0 else {
            let message = "cannot run \(command[0]): \(String(cString: strerror(result)))"
            throw ScopeFSError(result == ENOENT ? .runNotFound : .runNotExecutable, message)
        }
        let sources = forwarded.map { number in
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { kill(child, number) }
            source.resume()
            return source
        }
        defer { sources.forEach { $0.cancel() } }
        var status: Int32 = 0
        while waitpid(child, &status, 0) < 0 && errno == EINTR {}
        if status & 0x7f == 0 { return (status >> 8) & 0xff }
        return 128 + (status & 0x7f)
    }
}

extension ScopeFSError.Kind {
    /// Shell conventions for a command that cannot be run.
    static var runNotFound: ScopeFSError.Kind { .commandNotFound }
    static var runNotExecutable: ScopeFSError.Kind { .commandNotExecutable }
}
