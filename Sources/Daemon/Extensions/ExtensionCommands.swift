import Foundation
import Glibc
import Policy
import ProviderExtensions

/// How the daemon starts extensions: the commands of the built-in ones,
/// and the knobs tests turn (environment variables, documented in
/// docs/PROVIDERS.md, "Running an extension provider").
public enum ExtensionCommands {
    /// The built-in extensions, as paths under the extensions root.
    public static let builtIns: [String: String] = [
        "s3": "extensions/s3/scopefs_s3.py",
        "rclone": "extensions/rclone/scopefs_rclone.py",
        "folder": "docs/examples/extensions/folder.py",
    ]

    enum Failure: Error, CustomStringConvertible {
        case unknown(String)
        case notInstalled(String)
        case notBuiltIn(String)
        var description: String {
            switch self {
            case .notBuiltIn(let why):
                "a fleet's host starts built-in extensions only; the fleet's store names one with \(why)"
            case .unknown(let name):
                "no built-in extension \(name) (there are \(ExtensionCommands.builtIns.keys.sorted().joined(separator: ", ")); or give a command)"
            case .notInstalled(let path): "the extension \(path) is not installed"
            }
        }
    }

    /// The argv of a provider's extension.
    static func resolve(_ spec: ProviderExtensionSpec) throws -> [String] {
        if let command = spec.command, !command.isEmpty { return command }
        let name = spec.name ?? ""
        guard let relative = builtIns[name] else { throw Failure.unknown(name) }
        guard let script = root.map({ $0 + "/" + relative }), access(script, R_OK) == 0 else {
            throw Failure.notInstalled(relative)
        }
        // The folder example serves the folder its one argument names.
        let arguments = name == "folder" ? [spec.options["root"] ?? ""] : []
        return [python3, script] + arguments
    }

    /// The `python3` of the daemon's PATH: the one `make deps` installed
    /// the built-ins' packages for (boto3), a venv's or pyenv's included;
    /// the system's otherwise. Asked for its `sys.executable` once: a
    /// pyenv shim is a shell script that would not run in the sandbox.
    static let python3: String = {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        let found = path.split(separator: ":").map { String($0) + "/python3" }
            .first { $0.hasPrefix("/") && access($0, X_OK) == 0 }
        guard let found else { return "/usr/bin/python3" }
        let child = Process()
        child.executableURL = URL(fileURLWithPath: found)
        child.arguments = ["-c", "import sys; print(sys.executable)"]
        let output = Pipe()
        child.standardOutput = output
        child.standardError = FileHandle.nullDevice
        guard (try? child.run()) != nil else { return "/usr/bin/python3" }
        let data = output.fileHandleForReading.readDataToEndOfFile()
        child.waitUntilExit()
        let executable = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return child.terminationStatus == 0 && executable.hasPrefix("/") ? executable : "/usr/bin/python3"
    }()

    /// Where the built-in extensions are: $SCOPEFS_EXTENSIONS_ROOT, the
    /// source tree the binary was built in, or the installed share folder.
    static var root: String? {
        if let explicit = ProcessInfo.processInfo.environment["SCOPEFS_EXTENSIONS_ROOT"], !explicit.isEmpty {
            return explicit
        }
        var folder = (installedPath as NSString).deletingLastPathComponent
        for _ in 0..<4 {
            if access(folder + "/" + builtIns["s3"]!, R_OK) == 0 { return folder }
            folder = (folder as NSString).deletingLastPathComponent
        }
        let installed =
            ((installedPath as NSString).deletingLastPathComponent as NSString)
            .deletingLastPathComponent + "/share/scopefs"
        return access(installed, R_OK) == 0 ? installed : nil
    }

    /// Where the daemon's binary was installed: its folder locates the
    /// built-ins (the kernel marks a replaced binary's link " (deleted)").
    static let installedPath: String = {
        let link =
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        let replaced = " (deleted)"
        return link.hasSuffix(replaced) ? String(link.dropLast(replaced.count)) : link
    }()

    /// The daemon's own binary, to run `scopefs replica-writer` from. Not
    /// its path: an upgrade (`make install`, apt) puts a new file there
    /// while the daemon runs, and /proc/self/exe's link then reads
    /// "PATH (deleted)" (issue 50, finding 2). A child exec'ing
    /// /proc/self/exe before its own exec runs the very file its parent
    /// runs, replaced or not: the helper always matches the daemon.
    static let ownExecutable = "/proc/self/exe"

    private static func number(_ name: String) -> Double? {
        ProcessInfo.processInfo.environment[name].flatMap(Double.init)
    }

    /// The extension's bubblewrap sandbox (SPEC S41): the built-ins' tree
    /// read-only, the folders the owner named writable (the folder
    /// example's root too), the daemon's state and mount never.
    /// SCOPEFS_EXTENSION_SANDBOX=0 runs extensions as they are (debugging).
    static func sandbox(for spec: ProviderExtensionSpec, hiding hidden: [String]) -> ExtensionSandbox {
        var writable = spec.writablePaths ?? []
        if spec.name == "folder", let root = spec.options["root"] { writable.append(root) }
        return ExtensionSandbox(
            enabled: ProcessInfo.processInfo.environment["SCOPEFS_EXTENSION_SANDBOX"] != "0",
            readOnlyPaths: root.map { [$0 + "/extensions", $0 + "/clients/python", $0 + "/docs/examples/extensions"] }
                ?? [],
            writablePaths: writable, hiddenPaths: hidden)
    }

    static var tunables: ExtensionTunables {
        var tunables = ExtensionTunables()
        if let stall = number("SCOPEFS_EXTENSION_STALL_SECONDS") { tunables.stallLimit = stall }
        if let restart = number("SCOPEFS_EXTENSION_RESTART_SECONDS") { tunables.restartDelay = restart }
        return tunables
    }

    static var replicaTunables: ReplicaTunables {
        var tunables = ReplicaTunables()
        if let poll = number("SCOPEFS_EXTENSION_POLL_SECONDS") { tunables.pollInterval = poll }
        if let retry = number("SCOPEFS_EXTENSION_RETRY_SECONDS") {
            tunables.retryBase = retry
            tunables.retryCap = max(retry, min(tunables.retryCap, retry * 8))
        }
        return tunables
    }
}
