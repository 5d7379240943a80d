import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A ScopeFS world of its own for one test: a state directory, a provider
/// `local` backed by a temporary folder with the files asked for, the app,
/// its grants, and a mount, all under a new temporary directory (SPEC S1,
/// S2). The same world as the pytest plugin's `scopefs_mount` fixture
/// (`clients/python/scopefs_testing.py`).
///
///     let mount = try ScopeFSMount(app: "com.example.reader",
///                                  files: ["docs/report.txt": "numbers\n"], grants: ["local:docs"])
///     defer { mount.close() }
///     let app = try mount.start([reader, mount.path("local:docs/report.txt")])
///     try app.waitForLine("READY")
///     try mount.revoke("local:docs")
///
/// `close()` (or the end of `withScopeFSMount`, or deinit) stops the app
/// processes it started, unmounts, and removes the directory. Every helper
/// runs the `scopefs` CLI as the mount's owner: an app process cannot (77,
/// SPEC S5), which is why the code under test runs in a process of its own
/// (`start`, `run`). Items are `PROVIDER:RELPATH`, as `scopefs grant` takes
/// them.
public final class ScopeFSMount: Sendable {
    /// What a start of a security scope is needed for (`scopefs mount --scopes`, SPEC S9).
    public enum Scopes: String, Sendable {
        case strict, lenient
    }

    /// What a revocation does to descriptors opened before it
    /// (`scopefs mount --open-files`, SPEC S14).
    public enum OpenFiles: String, Sendable {
        case revoke, keep
    }

    /// The provider every mount has, backed by `root/providers/local`.
    public static let localProvider = "local"

    /// The app that `start`, `run` and the helpers act for unless told otherwise.
    public let app: String
    /// The `scopefs` binary every command runs.
    public let binary: String
    /// The temporary directory that holds everything below.
    public let root: String
    /// The state directory (`scopefs --state`).
    public let stateDirectory: String
    /// Where the file system is mounted.
    public let mountpoint: String
    /// The environment of every process started: this process's, without
    /// `SCOPEFS_STATE`, with `XDG_STATE_HOME` inside `root`.
    let environment: [String: String]
    private let state = Mutex(State())

    private struct State {
        var mounted = false
        var started: [AppProcess] = []
        var providers: [String: String] = [:]
        var processes = 0
    }

    /// Creates the world: `files` (relative path to text) in provider
    /// `local`, the app, `grants` and `readOnlyGrants` (items) given to it,
    /// and, when `mounted`, a mount with `scopes` and `openFiles`. With
    /// `mounted: false`, add what the test needs and call `mount()`.
    ///
    /// - Throws: `ScopeFSTestingError.unavailable` without a `scopefs`
    ///   binary or `/dev/fuse` (`unavailableReason`), or what a command said.
    public init(
        app: String = "com.example.app", files: [String: String] = [:], grants: [String] = [],
        readOnlyGrants: [String] = [], scopes: Scopes = .strict, openFiles: OpenFiles = .revoke,
        mounted: Bool = true
    ) throws(ScopeFSTestingError) {
        if let reason = Self.unavailableReason { throw .unavailable(reason) }
        self.app = app
        binary = Self.binaryPath ?? "scopefs"
        root = try Self.makeTemporaryDirectory()
        stateDirectory = root + "/state"
        mountpoint = root + "/mnt"
        var environment = ProcessInfo.processInfo.environment
        environment["SCOPEFS_STATE"] = nil
        environment["XDG_STATE_HOME"] = root + "/xdg-state"
        self.environment = environment
        do {
            try makeDirectory(mountpoint)
            try makeDirectory(root + "/logs")
            try cli(["init"])
            try addProvider(Self.localProvider)
            try addApp(app)
            for (relative, content) in files.sorted(by: { $0.key < $1.key }) {
                try writeOnHost("\(Self.localProvider):\(relative)", content)
            }
            for item in grants { try grant(item) }
            for item in readOnlyGrants { try grant(item, readOnly: true) }
            if mounted { try mount(scopes: scopes, openFiles: openFiles) }
        } catch {
            close()
            throw error
        }
    }

    deinit {
        close()
    }

    // MARK: the world

    /// Registers a provider backed by a new folder `root/providers/ID`,
    /// with `files` (relative path to text) in it; returns the folder.
    @discardableResult
    public func addProvider(_ id: String, files: [String: String] = [:]) throws(ScopeFSTestingError) -> String {
        let directory = root + "/providers/" + id
        try makeDirectory(directory)
        try cli(["provider", "add", id, directory])
        state.withLock { $0.providers[id] = directory }
        for (relative, content) in files.sorted(by: { $0.key < $1.key }) {
            try writeOnHost("\(id):\(relative)", content)
        }
        return directory
    }

    /// Registers another app (`scopefs app add`).
    public func addApp(_ id: String) throws(ScopeFSTestingError) {
        try cli(["app", "add", id])
    }

    /// Grants an item to the app (`scopefs grant`); returns the grant id.
    @discardableResult
    public func grant(_ item: String, app: String? = nil, readOnly: Bool = false) throws(ScopeFSTestingError) -> Int {
        let arguments = ["grant", app ?? self.app, item, "--json"] + (readOnly ? ["--read-only"] : [])
        return try decode(GrantRow.self, from: cli(arguments)).grant
    }

    /// Mounts at `mountpoint` (`scopefs mount`, in the background: it
    /// returns once the mount is ready).
    public func mount(scopes: Scopes = .strict, openFiles: OpenFiles = .revoke) throws(ScopeFSTestingError) {
        try cli(["mount", mountpoint, "--scopes", scopes.rawValue, "--open-files", openFiles.rawValue])
        state.withLock { $0.mounted = true }
    }

    /// Stops the app processes `start` left running (their process groups,
    /// with SIGKILL), unmounts (the daemon exits), and removes `root`
    /// unless something is still mounted there (the apps' output files
    /// with it: read them before). Safe to call twice.
    public func close() {
        let (started, mounted) = state.withLock { state in
            defer { (state.started, state.mounted) = ([], false) }
            return (state.started, state.mounted)
        }
        started.forEach { $0.kill() }
        // Also a mount whose `scopefs mount` failed late (it timed out
        // after the kernel had mounted): nothing may stay behind.
        if mounted || Self.isMounted(under: mountpoint),
            (try? cli(["unmount", mountpoint], check: false))?.status != 0
        {
            let fallback = try? Subprocess(
                ["fusermount3", "-u", mountpoint], environment: environment, outputPath: "/dev/null",
                errorPath: "/dev/null", searchPath: true)
            if let fallback, fallback.wait(timeout: .seconds(30)) == nil { fallback.kill() }
        }
        if !Self.isMounted(under: root) {
            try? FileManager.default.removeItem(atPath: root)
        }
    }

    // MARK: paths

    /// The item as the app sees it through the mount:
    /// `MOUNT/APP/Providers/PROVIDER/RELPATH` (SPEC S2); a sandboxed app
    /// has its view of the mount at the same path (`$SCOPEFS_MOUNT`).
    public func path(_ item: String, app: String? = nil) -> String {
        mountpoint + "/" + (app ?? self.app) + "/" + pathInApp(item)
    }

    /// The item relative to the app's view, `Providers/PROVIDER/RELPATH`:
    /// what fault rules match (`inject(path:)`), and what an app that
    /// takes paths relative to `$SCOPEFS_MOUNT` is given.
    public func pathInApp(_ item: String) -> String {
        let (provider, relative) = Self.split(item)
        return relative.isEmpty ? "Providers/\(provider)" : "Providers/\(provider)/\(relative)"
    }

    /// The item's file in its provider's folder (`local:docs/a.txt` is
    /// `root/providers/local/docs/a.txt`).
    public func hostPath(_ item: String) throws(ScopeFSTestingError) -> String {
        let (provider, relative) = Self.split(item)
        guard let directory = state.withLock({ $0.providers[provider] }), !relative.isEmpty,
            !relative.split(separator: "/").contains("..")
        else {
            throw .badItem("\(item): expected PROVIDER:RELPATH of a provider of this mount")
        }
        return directory + "/" + relative
    }

    static func split(_ item: String) -> (provider: String, relative: String) {
        let provider = item.prefix { $0 != ":" }
        var relative = item.dropFirst(provider.count + 1)
        while relative.hasPrefix("/") { relative = relative.dropFirst() }
        while relative.hasSuffix("/") { relative = relative.dropLast() }
        return (String(provider), relative == "." ? "" : String(relative))
    }

    // MARK: the CLI

    /// What a `scopefs` command did.
    public struct CommandResult: Sendable {
        public let status: Int32
        public let output: String
        public let errorOutput: String
    }

    /// Runs `scopefs --state STATE ARGUMENTS...` as the owner, at most
    /// `timeout`. With `check`, a nonzero exit status throws
    /// `.commandFailed` naming the command and its error output.
    @discardableResult
    public func cli(_ arguments: [String], check: Bool = true, timeout: Duration = .seconds(30))
        throws(ScopeFSTestingError) -> CommandResult
    {
        let process = try spawn([binary, "--state", stateDirectory] + arguments, name: "cli")
        defer {
            unlink(process.outputPath)
            unlink(process.errorPath)
        }
        let command = "scopefs " + arguments.joined(separator: " ")
        guard let status = process.wait(timeout: timeout) else {
            process.kill()
            throw .timedOut("`\(command)` did not end within \(timeout)")
        }
        let result = CommandResult(
            status: status, output: String(decoding: process.output, as: UTF8.self),
            errorOutput: String(decoding: process.errorOutput, as: UTF8.self))
        if check && status != 0 {
            throw .commandFailed(command: command, status: status, errorOutput: result.errorOutput)
        }
        return result
    }

    /// Starts a process with this mount's environment, its output in
    /// `root/logs/NAME-N.out` and `.err`.
    func spawn(_ arguments: [String], name: String, extraEnvironment: [String: String] = [:])
        throws(ScopeFSTestingError) -> Subprocess
    {
        let number = state.withLock { state in
            state.processes += 1
            return state.processes
        }
        let base = "\(root)/logs/\(name)-\(number)"
        return try Subprocess(
            arguments, environment: environment.merging(extraEnvironment) { $1 }, outputPath: base + ".out",
            errorPath: base + ".err")
    }

    func track(_ process: AppProcess) {
        state.withLock { $0.started.append(process) }
    }

    func decode<Value: Decodable>(_ type: Value.Type, from result: CommandResult) throws(ScopeFSTestingError) -> Value {
        do {
            return try JSONDecoder().decode(type, from: Data(result.output.utf8))
        } catch {
            throw .unexpectedOutput(command: "scopefs", output: result.output)
        }
    }

    // MARK: files and the machine

    private func makeDirectory(_ path: String) throws(ScopeFSTestingError) {
        do {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        } catch {
            throw .hostFileFailed("cannot create \(path): \(error.localizedDescription)")
        }
    }

    /// A new directory under `$TMPDIR`, by its canonical path: the one
    /// /proc/self/mountinfo shows, which `isMounted(under:)` compares with
    /// before anything is removed.
    private static func makeTemporaryDirectory() throws(ScopeFSTestingError) -> String {
        var template = Array((NSTemporaryDirectory() + "/scopefs-test-XXXXXX").utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }),
            let canonical = realpath(made, nil)
        else {
            throw .hostFileFailed("cannot create a temporary directory: \(String(cString: strerror(errno)))")
        }
        defer { free(canonical) }
        return String(cString: canonical)
    }

    /// Whether anything is mounted at or under `directory` (mountinfo's fifth field).
    static func isMounted(under directory: String) -> Bool {
        guard let table = try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8) else { return false }
        return table.split(separator: "\n").contains { line in
            let fields = line.split(separator: " ")
            guard fields.count > 4 else { return false }
            let point = unescapeMountField(fields[4])
            return point == directory || point.hasPrefix(directory + "/")
        }
    }

    /// A mountinfo field as a path: the kernel writes space, tab, newline
    /// and backslash as `\ooo` (octal).
    static func unescapeMountField(_ field: Substring) -> String {
        var bytes: [UInt8] = []
        var rest = Array(field.utf8)[...]
        while let byte = rest.first {
            let octal = rest.dropFirst().prefix(3)
            if byte == UInt8(ascii: "\\"), octal.count == 3,
                let value = UInt8(String(decoding: octal, as: UTF8.self), radix: 8)
            {
                bytes.append(value)
                rest = rest.dropFirst(4)
            } else {
                bytes.append(byte)
                rest = rest.dropFirst()
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// `$SCOPEFS_BIN`, else `scopefs` found on `PATH`.
    public static var binaryPath: String? {
        let environment = ProcessInfo.processInfo.environment
        if let given = environment["SCOPEFS_BIN"], !given.isEmpty { return given }
        for directory in (environment["PATH"] ?? "").split(separator: ":") {
            let candidate = "\(directory)/scopefs"
            if access(candidate, X_OK) == 0 { return candidate }
        }
        return nil
    }

    /// Why no mount can be made here (no `scopefs` binary, no `/dev/fuse`),
    /// or nil. For a trait: `.enabled(if: ScopeFSMount.isAvailable)`.
    public static var unavailableReason: String? {
        guard binaryPath != nil else { return "no scopefs binary (set SCOPEFS_BIN or put scopefs on PATH)" }
        guard access("/dev/fuse", F_OK) == 0 else { return "no /dev/fuse on this machine" }
        return nil
    }

    /// Whether a mount can be made here (`unavailableReason` is nil).
    public static var isAvailable: Bool { unavailableReason == nil }
}

/// A grant as every `--json` prints it (docs/CLI.md "JSON output").
struct GrantRow: Decodable {
    let grant: Int
    let provider: String
    let path: String
}
