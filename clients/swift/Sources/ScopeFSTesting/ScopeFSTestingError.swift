import Foundation

/// Why a ScopeFSTesting call failed. The description says what was done
/// and what came back, so a failing test reads on its own.
public enum ScopeFSTestingError: Error, Equatable, Sendable, CustomStringConvertible {
    /// No `scopefs` binary (`$SCOPEFS_BIN`, `scopefs` on `PATH`) or no
    /// `/dev/fuse`: see `ScopeFSMount.unavailableReason`.
    case unavailable(String)
    /// A process could not be started (posix_spawn failed).
    case cannotStart(String, String)
    /// A `scopefs` command exited with a nonzero status.
    case commandFailed(command: String, status: Int32, errorOutput: String)
    /// A `scopefs` command, or an app being waited for, did not end in time.
    case timedOut(String)
    /// The app ended, or the time ran out, before it printed the line.
    case lineNotPrinted(line: String, output: String, errorOutput: String, exitStatus: Int32?)
    /// An item that is not `PROVIDER:RELPATH` of a provider of this mount,
    /// or a grant the app does not have.
    case badItem(String)
    /// A command's output that is not the JSON `docs/CLI.md` documents.
    case unexpectedOutput(command: String, output: String)
    /// A file operation in a provider's folder or the mount's temporary
    /// directory failed (`writeOnHost`, `renameOnHost`, ...).
    case hostFileFailed(String)
    /// An executable product of the package under test that is not built.
    case productNotFound(name: String, searched: [String])

    public var description: String {
        switch self {
        case .unavailable(let reason):
            return "ScopeFSTesting: \(reason)"
        case .cannotStart(let program, let reason):
            return "cannot start \(program): \(reason)"
        case .commandFailed(let command, let status, let errorOutput):
            return "`\(command)` exited \(status): \(errorOutput.trimmingCharacters(in: .whitespacesAndNewlines))"
        case .timedOut(let what):
            return "timed out: \(what)"
        case .lineNotPrinted(let line, let output, let errorOutput, let exitStatus):
            let ending = exitStatus.map { "the app exited \($0)" } ?? "the app is still running"
            return "the app never printed \"\(line)\" (\(ending)); its output:\n\(Self.shortened(output))\n"
                + "its errors:\n\(Self.shortened(errorOutput))"
        case .badItem(let why):
            return why
        case .unexpectedOutput(let command, let output):
            return "`\(command)` printed what ScopeFSTesting cannot read: \(Self.shortened(output))"
        case .hostFileFailed(let why):
            return why
        case .productNotFound(let name, let searched):
            return
                "no built executable \(name) in \(searched.joined(separator: ", ")) (is it a product of this package?)"
        }
    }

    /// A process's output, shortened to its first and last lines: a crash
    /// says why at the top of a long backtrace, a run ends with its outcome.
    static func shortened(_ text: String) -> String {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        guard lines.count > 24 else { return text }
        return (lines.prefix(12) + ["[\(lines.count - 20) lines]"] + lines.suffix(8)).joined(separator: "\n")
    }
}
