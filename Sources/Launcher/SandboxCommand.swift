import CommandErrors
import Foundation
import Glibc
import Policy

/// Finds the app's command as the sandbox will, before the sandbox starts,
/// so that a missing or non-executable command exits 127 or 126 with a
/// message that says what the sandbox shows (CLI.md), not bubblewrap's
/// `execvp` text and exit 1. The sandbox shows host paths at the same
/// place, so the check runs on the host through `Sandbox.shows`.
extension Sandbox {
    /// Returns the program's path on the host (nil for `scopefs` itself).
    @discardableResult
    package func checkCommand(_ name: String, environment: [String: String]) throws(CommandError) -> String? {
        if name.contains("/") {
            let path = name.hasPrefix("/") ? name : workingDirectory + "/" + name
            try checkExecutable(path, as: name)
            return path
        }
        let searchPath = (environment["PATH"] ?? "").split(separator: ":").map(String.init)
        for folder in searchPath {
            let candidate = folder + "/" + name
            if folder == Self.binaryInside {
                if name == "scopefs" { return nil }
                continue
            }
            if shows(candidate), isExecutableFile(candidate) { return candidate }
        }
        throw CommandError(
            .commandNotFound,
            "\(name): not found in the sandbox's PATH (\(searchPath.joined(separator: ":"))); the sandbox shows "
                + "the system's programs, scopefs and what --expose adds: name the program by its path and "
                + "--expose its folder, or use --no-sandbox")
    }

    private func checkExecutable(_ path: String, as name: String) throws(CommandError) {
        guard shows(path) else {
            let onHost = access(path, F_OK) == 0
            throw CommandError(
                .commandNotFound,
                "\(name): "
                    + (onHost
                        ? "\(path) is on the host, but the sandbox does not show it: add --expose with its folder"
                        : "no such file in the sandbox")
                    + (name.hasPrefix("/") ? "" : " (relative paths start at \(workingDirectory); see --cwd)"))
        }
        var status = stat()
        guard stat(path, &status) == 0 else {
            throw CommandError(.commandNotFound, "\(name): no such file in the sandbox")
        }
        guard isExecutableFile(path) else {
            throw CommandError(.commandNotExecutable, "\(name): not an executable file")
        }
    }

    private func isExecutableFile(_ path: String) -> Bool {
        var status = stat()
        return stat(path, &status) == 0 && status.st_mode & S_IFMT == S_IFREG && status.st_mode & 0o111 != 0
    }

    /// Whether the sandbox shows this host path at the same place.
    package func shows(_ path: String) -> Bool {
        let path = (path as NSString).standardizingPath
        func within(_ folder: String) -> Bool { path == folder || path.hasPrefix(folder + "/") }
        if Self.systemDirectories.contains(where: within) { return true }
        if Self.etcAllowList.contains(where: within) { return true }
        if shape.exposed.contains(where: { within($0.path) }) { return true }
        if Self.libraryFoldersOutsideSystem.contains(where: within) { return true }
        return within(appDirectory)
    }
}
