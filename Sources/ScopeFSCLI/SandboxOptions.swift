import ArgumentParser
import CommandErrors
import Foundation
import Launcher

/// The sandbox's options, shared by `run`, `test` and `chaos` (issue 31):
/// what the developer's program needs beyond the default sandbox.
struct SandboxOptions: ParsableArguments {
    @Flag(help: "Keep the host's network in the sandbox (by default it has none, not even loopback).")
    var shareNet = false
    @Option(
        name: .customLong("expose"),
        help: ArgumentHelp(
            "A host path the sandbox shows at the same place, read-only; PATH:rw shows it read-write (repeatable).",
            valueName: "path[:rw]"),
        completion: .file())
    var exposed: [String] = []
    @Option(
        name: .customLong("env"),
        help: ArgumentHelp(
            "NAME=VALUE sets a variable in the sandbox; NAME passes yours through (repeatable).",
            valueName: "name[=value]"))
    var environment: [String] = []
    @Option(
        name: .customLong("cwd"),
        help: ArgumentHelp(
            "Where the command starts in the sandbox (default: the app's container); relative to here.",
            valueName: "folder"),
        completion: .directory)
    var workingDirectory: String?
    @Flag(
        help: ArgumentHelp(
            "Give the app the session bus through xdg-dbus-proxy, limited to the portals (org.freedesktop.portal.*), and its documents of `scopefs portal` at the document mount point."
        ))
    var portalBus = false

    /// Whether any option shapes the sandbox (they mean nothing without it).
    var shapesSandbox: Bool {
        shareNet || !exposed.isEmpty || !environment.isEmpty || workingDirectory != nil || portalBus
    }

    func validate() throws {
        for text in exposed {
            let path = SandboxShape.Exposure.parse(text).path
            if !path.hasPrefix("/") { throw ValidationError("--expose takes an absolute path: \(text)") }
        }
        for entry in environment {
            let name = entry.split(separator: "=", maxSplits: 1).first.map(String.init) ?? ""
            let valid = !name.isEmpty && name.allSatisfy { $0 == "_" || $0.isASCII && ($0.isLetter || $0.isNumber) }
            if !valid || name.first!.isNumber { throw ValidationError("--env takes NAME=VALUE or NAME: \(entry)") }
        }
    }

    /// The shape, with `--env NAME` read from this environment and `--cwd`
    /// made absolute.
    var shape: SandboxShape {
        var variables: [String: String] = [:]
        let owners = ProcessInfo.processInfo.environment
        for entry in environment {
            let parts = entry.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
            if parts.count == 2 {
                variables[parts[0]] = parts[1]
            } else if let value = owners[parts[0]] {
                variables[parts[0]] = value
            }
        }
        let folder = workingDirectory.map { path in
            let absolute = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
            return (absolute as NSString).standardizingPath
        }
        return SandboxShape(
            shareNetwork: shareNet, exposed: exposed.map(SandboxShape.Exposure.parse), environment: variables,
            workingDirectory: folder, portalBus: portalBus)
    }

    /// The same options for a `scopefs run` that `test` and `chaos` start.
    var runArguments: [String] {
        var arguments = shareNet ? ["--share-net"] : []
        for path in exposed { arguments += ["--expose", path] }
        for entry in environment { arguments += ["--env", entry] }
        if let folder = shape.workingDirectory { arguments += ["--cwd", folder] }
        if portalBus { arguments.append("--portal-bus") }
        return arguments
    }
}
