import ArgumentParser
import CSystemShims
import CommandErrors
import Control
import Daemon
import FleetStore
import Foundation
import Glibc
import HostText
import Launcher
import Logging
import Policy
import PolicyStore
import Processes
import ScopeFS

extension MountConfiguration.OpenFiles: ExpressibleByArgument {}
extension ScopeTable.Mode: ExpressibleByArgument {}
extension LogDestination: ExpressibleByArgument {}
extension HostChangeMode: ExpressibleByArgument {}

struct MountCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mount",
        abstract: "Serve the ScopeFS mount; in the background, return once it is ready.")
    @OptionGroup var options: StateOptions
    @Argument(completion: .directory) var mountpoint: String
    @Flag(help: "Stay in the foreground.") var foreground = false
    @Option(help: "What revocation does to descriptors opened before it: revoke (default) or keep.")
    var openFiles: MountConfiguration.OpenFiles = .revoke
    @Flag(help: "Let other users' processes reach the mount (FUSE allow_other).") var allowOther = false
    @Option(help: "strict (default): content operations need a started scope; lenient: an active grant is enough.")
    var scopes: ScopeTable.Mode = .strict
    @Option(help: "Outstanding starts a process may hold.") var scopeBudget: Int = 4096
    @Option(
        help:
            "Days an imported copy stays in an app's inbox when no process of the app was running to have it."
    )
    var inboxDays: Int = 7
    @Option(
        help: """
            Backing descriptors (open files and folders) one app may make the daemon hold; past it the app \
            gets EMFILE. Default 4096, or a quarter of what the daemon's limit leaves for apps.
            """)
    var descriptorsPerApp: Int?
    @Option(
        help: """
            Folders that keep an open descriptor at a time; others are opened again from their parent \
            when used. Default 4096; at most an eighth of the daemon's descriptor limit.
            """)
    var folderDescriptors: Int?
    @Option(
        help: """
            Nodes (files and folders the kernel has looked up) the daemon keeps, about 1 KiB of memory each; \
            past it the kernel is asked to forget the least recently used ones, which are looked up again on \
            their next use. Default 100000; 0: no bound; else at least 100.
            """)
    var maxNodes: Int?
    @Option(
        name: .customLong("io-uring"),
        help: ArgumentHelp(
            """
            Serve FUSE requests over io_uring (Linux 6.14+, while the fuse module's enable_uring parameter is Y) \
            with THREADS threads on each of the kernel's queues (one queue per CPU); the mount serves through \
            /dev/fuse when the kernel does not offer it. Off by default (docs/PERFORMANCE.md, "FUSE over io_uring").
            """, valueName: "threads"))
    var ringThreads: UInt32?
    @Option(
        help: """
            How host changes made outside the mount reach the kernel's caches: auto (default: fanotify when the \
            daemon may mark file systems, as root; else inotify), fanotify, inotify, or none (caches expire \
            after --cache-timeout).
            """)
    var hostChanges: HostChangeMode = .auto
    @Option(
        help: """
            Seconds the kernel may cache entries (negative ones too) and attributes: default 300 with a \
            host-change channel (every change drops them at once), 1 without.
            """)
    var cacheTimeout: Double?
    @Flag(
        help: """
            Serve every read and write of container files through the daemon, as for provider files, \
            where the kernel would otherwise do them itself (FUSE passthrough; `status` says which).
            """)
    var noContainerPassthrough = false
    @Option(help: .hidden) var readyFd: Int32?
    @Option(help: "Seconds to wait for a background daemon to be ready.") var timeout: Int32 = 20
    @Option(
        help: """
            Where the daemon logs: auto (default: the journal under systemd or where journald runs, \
            else the terminal in the foreground and <state>/daemon.log, size-rotated, in the background), \
            journal, file or stderr.
            """)
    var log: LogDestination = .auto
    @Flag(help: "In the background: print the mount and its daemon as JSON once it is ready.") var json = false
    /// `--database` and its options: join the fleet's store, then mount (SPEC S44).
    @OptionGroup var fleet: FleetOptions

    func validate() throws {
        if json && foreground {
            throw ValidationError("--json reports a background mount; --foreground prints nothing")
        }
        if scopeBudget < 1 { throw ValidationError("--scope-budget must be at least 1") }
        if let descriptorsPerApp, descriptorsPerApp < 1 {
            throw ValidationError("--descriptors-per-app must be at least 1")
        }
        if let ringThreads, !(1...64).contains(ringThreads) {
            throw ValidationError("--io-uring takes 1 to 64 threads per queue")
        }
        if let maxNodes, maxNodes != 0, maxNodes < NodeBudget.minimumLimit {
            throw ValidationError("--max-nodes must be 0 (no bound) or at least \(NodeBudget.minimumLimit)")
        }
        if let folderDescriptors, folderDescriptors < 1 {
            throw ValidationError("--folder-descriptors must be at least 1")
        }
        if inboxDays < 0 { throw ValidationError("--inbox-days must be 0 or more") }
        if let cacheTimeout, !(cacheTimeout >= 0 && cacheTimeout <= 86400) {
            throw ValidationError("--cache-timeout must be between 0 and 86400 seconds")
        }
    }

    func run() throws {
        try report { () throws(CommandError) in
            try OwnerCheck.require(options.directory, to: "mount")
            if let configuration = try fleet.configuration() {
                try FleetMembership.join(options.directory, configuration)
            }
            warnIfNotEmpty()
            if foreground { return try serve() }
            try startInBackground()
        }
    }

    /// A mount over a folder with files hides them without a word
    /// otherwise (issue 50, finding 4); like libfuse 3 and mount(8),
    /// ScopeFS mounts anyway. A folder that is a mount already is not
    /// listed: its daemon may be one that answers nothing.
    private func warnIfNotEmpty() {
        let path = FolderOverlap.lexical(mountpoint)
        guard !MountPoint.isMounted(path), let names = HostFiles.names(in: path), let first = names.sorted().first
        else { return }
        let count = names.count == 1 ? "1 entry" : "\(names.count) entries"
        FileHandle.standardError.write(
            Data(
                "scopefs: warning: \(path.escapedForTerminal) is not empty (\(count), such as \(first.escapedForTerminal)): the mount hides them until it is unmounted\n"
                    .utf8))
    }

    private func serve() throws(CommandError) {
        // A background daemon was started with its destination resolved.
        let background = readyFd != nil
        DaemonLog.bootstrap(
            DaemonLog.resolve(log, foreground: !background), state: options.directory, background: background)
        let logger = Logger(label: "scopefs")
        let daemonOptions = DaemonOptions(
            state: options.directory, mountpoint: mountpoint, openFiles: openFiles, allowOther: allowOther,
            scopeMode: scopes, scopeBudget: scopeBudget, inboxDays: inboxDays, readyDescriptor: readyFd,
            hostChanges: hostChanges, cacheTimeout: cacheTimeout, descriptorsPerApp: descriptorsPerApp,
            folderDescriptors: folderDescriptors, containerPassthrough: !noContainerPassthrough,
            maxNodes: maxNodes.map { $0 == 0 ? .max : $0 }, ringThreads: ringThreads ?? 0)
        do throws(CommandError) {
            _ = try Daemon.run(daemonOptions, logger: logger)
        } catch {
            Readiness.report(readyFd, .failed(error))
            throw error
        }
    }

    /// Re-runs this binary with `--foreground` in a new session, logging to
    /// the journal or `<state>/daemon.log`, and waits for its readiness report.
    private func startInBackground() throws(CommandError) {
        _ = try options.backend().localDatabase()  // fail here, with the right code, if it is unusable
        var pipe: [Int32] = [0, 0]
        guard Glibc.pipe(&pipe) == 0 else { throw CommandError(.ioError, "pipe: \(String(cString: strerror(errno)))") }
        var arguments = [
            "--state", options.directory.path, mountpoint, "--foreground", "--open-files", openFiles.rawValue,
            "--ready-fd", "3", "--scopes", scopes.rawValue, "--scope-budget", String(scopeBudget),
            "--inbox-days", String(inboxDays), "--host-changes", hostChanges.rawValue,
        ]
        if let cacheTimeout { arguments += ["--cache-timeout", String(cacheTimeout)] }
        if let descriptorsPerApp { arguments += ["--descriptors-per-app", String(descriptorsPerApp)] }
        if let folderDescriptors { arguments += ["--folder-descriptors", String(folderDescriptors)] }
        if let maxNodes { arguments += ["--max-nodes", String(maxNodes)] }
        if let ringThreads { arguments += ["--io-uring", String(ringThreads)] }
        if allowOther { arguments.append("--allow-other") }
        if noContainerPassthrough { arguments.append("--no-container-passthrough") }
        let destination = DaemonLog.resolve(log, foreground: false)
        arguments += ["--log", destination.rawValue]
        // Output before the daemon's logging is up (and a journal daemon's
        // until it opens its stream) goes to the log file, or nowhere.
        let output = destination == .file ? options.directory.daemonLogPath : "/dev/null"
        let pid = try Spawner.daemon(arguments: ["mount"] + arguments, readyPipe: pipe[1], log: output)
        close(pipe[1])
        defer { close(pipe[0]) }
        switch Readiness.await(pipe[0], timeoutSeconds: timeout) {
        case .ready where json:
            struct Mounted: Encodable {
                var mountpoint: String
                var pid: Int32
                var stateDirectory: String
            }
            let path = DaemonInfo.read(from: options.directory)?.mountpoint ?? mountpoint
            printJSON(Mounted(mountpoint: path, pid: pid, stateDirectory: options.directory.path))
        case .ready:
            print("mounted \(mountpoint.escapedForTerminal) (daemon pid \(pid))")
        case .failed(let error) where error.kind == .timedOut && kill(pid, 0) == 0:
            // What was mounted stays until its daemon ends: say how (issue 50).
            throw CommandError(
                .timedOut,
                "\(error.message); daemon \(pid) still runs: `scopefs --state \(options.directory.path) unmount \(FolderOverlap.lexical(mountpoint))` ends it"
                    .escapedForTerminal)
        case .failed(let error):
            throw error
        case nil:
            var status: Int32 = 0
            waitpid(pid, &status, WNOHANG)
            let logName = destination == .file ? options.directory.daemonLogPath : "the journal (journalctl -t scopefs)"
            throw CommandError(.cannotMount, "the daemon exited before the mount was ready; see \(logName)")
        }
    }
}

/// Starts the daemon as a detached process.
enum Spawner {
    static func daemon(arguments: [String], readyPipe: Int32, log: String) throws(CommandError) -> pid_t {
        let executable =
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        posix_spawn_file_actions_adddup2(&actions, readyPipe, 3)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        posix_spawnattr_setflags(&attributes, scopefs_posix_spawn_setsid)  // survive the terminal
        let argv = ([executable] + arguments).map { $0.withHostCString { strdup($0) } } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, executable, &actions, &attributes, argv, environ)
        guard result == 0 else {
            throw CommandError(.internalError, "cannot start the daemon: \(String(cString: strerror(result)))")
        }
        return pid
    }
}
