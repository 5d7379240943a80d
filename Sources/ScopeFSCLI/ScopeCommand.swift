import ArgumentParser
import CSystemShims
import CommandErrors
import Foundation
import Glibc
import HostText
import Policy
import PolicyStore

struct ScopeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "scope", abstract: "Security scopes from the shell.", subcommands: [Exec.self])

    struct Exec: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "exec",
            abstract: "Start accessing PATH in this process, then exec CMD (same pid): CMD runs in scope.",
            discussion: "Put --also PATH options before PATH: everything after PATH belongs to CMD.")
        @Option(
            name: .customLong("also"),
            help: ArgumentHelp("Another path to start accessing first (repeatable).", valueName: "path"),
            completion: .file())
        var others: [String] = []
        /// `run --hold-scopes`' grants, read before the run: one that ended
        /// since (a session grant of the last run) is skipped with a warning.
        @Option(name: .customLong("also-if-granted"), help: .hidden) var grantedPaths: [String] = []
        @Argument(help: "A path inside the mount.") var path: String
        @Argument(parsing: .captureForPassthrough, help: "The command and its arguments (after --).") var command:
            [String]

        func validate() throws {
            if command.drop(while: { $0 == "--" }).isEmpty { throw ValidationError("name a command to run after --") }
        }

        func run() throws {
            let command = Array(self.command.drop(while: { $0 == "--" }))
            try report { () throws(CommandError) in
                // The getxattr form tells the outcome in one call (docs/API.md).
                // Held until exit: this process becomes CMD, whose exit ends
                // the scope without a leak (SPEC S11).
                for granted in grantedPaths {
                    do throws(CommandError) {
                        _ = try ControlAttributes.read(granted, .startUntilExit)
                    } catch {
                        FileHandle.standardError.write(
                            Data(
                                "scopefs: --hold-scopes: no scope on this grant: \(error.message.escapedForTerminal)\n"
                                    .utf8))
                    }
                }
                for path in others + [path] { _ = try ControlAttributes.read(path, .startUntilExit) }
                let argv = command.map { $0.withHostCString { strdup($0) } } + [nil]
                execvp(argv[0]!, argv)
                let code = errno
                throw CommandError(
                    code == ENOENT ? .commandNotFound : .commandNotExecutable,
                    "cannot run \(command[0]): \(String(cString: strerror(code)))")
            }
        }
    }
}
