import CSystemShims
import Foundation
import Glibc
import PolicyStore

/// Starts a command as an app process (SPEC S5): registers this process
/// with the daemon as the root of the app's process tree, optionally moves
/// into a private mount namespace that shows only the app's directory, then
/// spawns the command and returns its exit status.
public enum AppLauncher {
    public static let sandboxPath = "/sandbox"

    public static func run(app: String, command: [String], sandbox: Bool, state: StateDirectory) throws(ScopeFSError)
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
        if sandbox {
            try enterSandbox(appDirectory: mountpoint + "/" + app, mountpoint: mountpoint)
            environment["HOME"] = sandboxPath + "/Container"
            environment["SCOPEFS_MOUNT"] = sandboxPath
            directory = sandboxPath + "/Container"
        }
        return try spawnAndWait(command, environment: environment, directory: directory)
    }

    /// A private mount namespace where the app's directory is at /sandbox
    /// and the rest of the mount is gone. unshare(CLONE_NEWNS) acts on the
    /// calling thread only, and posix_spawn clones from this thread.
    private static func enterSandbox(appDirectory: String, mountpoint: String) throws(ScopeFSError) {
        func fail(_ what: String) -> ScopeFSError {
            ScopeFSError(.refused, "--sandbox: \(what) failed: \(String(cString: strerror(errno))) (needs CAP_SYS_ADMIN)")
        }
        guard unshare(scopefs_clone_newns) == 0 else { throw fail("unshare(CLONE_NEWNS)") }
        guard Glibc.mount(nil, "/", nil, UInt(MS_REC | MS_PRIVATE), nil) == 0 else { throw fail("making mounts private") }
        mkdir(sandboxPath, 0o755)
        guard Glibc.mount(appDirectory, sandboxPath, nil, UInt(MS_BIND), nil) == 0 else { throw fail("bind mount") }
        guard umount2(mountpoint, Int32(MNT_DETACH)) == 0 else { throw fail("hiding \(mountpoint)") }
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
