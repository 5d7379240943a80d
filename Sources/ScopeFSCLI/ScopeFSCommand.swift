import ArgumentParser
import CommandErrors
import Control
import Documents
import FleetStore
import Foundation
import HostText
import Launcher
import Policy
import PolicyStore

@main
struct ScopeFSCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "scopefs",
        abstract: "The iOS/macOS document-picker security model for Linux apps, as a FUSE file system.",
        discussion: "Exit codes are listed in docs/CLI.md (installed as share/doc/scopefs/CLI.md).",
        version: ScopeFSVersion.description,
        subcommands: [
            InitCommand.self, ProviderCommand.self, AppCommand.self, GrantCommand.self, RevokeCommand.self,
            RestoreCommand.self, ForgetCommand.self, PrivacyCommand.self, MountCommand.self, UnmountCommand.self,
            RunCommand.self,
            StatusCommand.self, EventsCommand.self, ScopeCommand.self, OpenCommand.self, ImportCommand.self,
            ExportCommand.self, MoveCommand.self, QueryCommand.self, BookmarkCommand.self,
            PickCommand.self, AgentCommand.self, FaultCommand.self, ChaosCommand.self, TestCommand.self,
            PinCommand.self, UnpinCommand.self, EvictCommand.self, ReplicaWriterCommand.self, PortalCommand.self,
            SettingsCommand.self,
            FleetCommand.self,
        ])

    // Declared here too so that `scopefs --state DIR COMMAND` parses: the
    // subcommands read the same option group.
    @OptionGroup var options: StateOptions

    /// Parses the arguments as the kernel passed them: `CommandLine.arguments`
    /// turns bytes that are not UTF-8 into U+FFFD, and then `scopefs grant
    /// APP drive:caf\xe9.txt` names a file that does not exist (SPEC S33a).
    static func main() {
        let arguments = rawArguments()
        // Bash's script, with PROVIDER:RELPATH words made whole (CompletionScripts).
        let environment = ProcessInfo.processInfo.environment
        if let script = CompletionScripts.replacement(for: arguments, environment: environment) {
            print(script, terminator: "")
            return
        }
        main(arguments)
    }

    /// `argv` after the program name, each kept losslessly (`HostName`).
    static func rawArguments() -> [String] {
        (1..<Int(CommandLine.argc)).map { index in
            CommandLine.unsafeArgv[index].map { HostName.string(cString: $0) } ?? ""
        }
    }
}

/// `--state DIR`, shared by every command (SPEC S1).
struct StateOptions: ParsableArguments {
    @Option(
        name: .long, help: "State directory (default: $SCOPEFS_STATE, else $XDG_STATE_HOME/scopefs).",
        completion: .directory)
    var state: String?

    var directory: StateDirectory { StateDirectory.resolve(explicit: state) }

    func repository() throws(CommandError) -> PolicyRepository {
        let repository = PolicyRepository(database: try PolicyDatabase.open(directory))
        // What a killed import/export/move left staged (SPEC S34).
        PartialCopies(state: directory).sweep()
        return repository
    }

    /// The isolation layer this state directory is on, for reading: the
    /// fleet's store once `init --database` put it there (issue 34),
    /// else its own SQLite file.
    func isolationStore() throws(CommandError) -> any IsolationStore {
        if let configuration = try FleetConfiguration.load(directory) {
            return FleetRepository(database: try FleetDatabase(configuration))
        }
        return try repository()
    }

    /// The repository for a command that changes the isolation layer:
    /// refused with exit 77 inside an app process (SPEC S5).
    func repositoryForChange(_ action: String) throws(CommandError) -> PolicyRepository {
        try OwnerCheck.require(directory, to: action)
        try refuseFleetChange(action)
        return try repository()
    }

    /// One of the owner's policy commands, through the daemon when one
    /// serves the state directory, else against the store here
    /// (`ControlClient.policy`). A run's cgroup is checked first, so an
    /// app process reads the same refusal either way (SPEC S5).
    func policy(_ command: ControlCommand, _ action: String) throws(CommandError) -> ControlResponse {
        try OwnerCheck.requireOutsideRuns(to: action)
        try refuseFleetChange(action)
        // The local path runs only when no daemon answers, so the daemon's
        // `whoami` (the rest of `repositoryForChange`'s check) has nothing to add.
        return try ControlClient.policy(command, state: directory) { () throws(CommandError) in try repository() }
    }
}

extension StateOptions {
    /// A state directory on the fleet's store changes its policy only
    /// through `scopefs fleet`: a change written to the local SQLite file
    /// would reach no daemon, and a revoke must never be local only (SPEC S44).
    func refuseFleetChange(_ action: String) throws(CommandError) {
        guard FileManager.default.fileExists(atPath: directory.path + "/" + FleetConfiguration.fileName) else { return }
        throw CommandError(
            .badState,
            "cannot \(action) here: \(directory.path) keeps its isolation layer in the fleet's PostgreSQL database; use `scopefs fleet` (see docs/CLI.md)"
        )
    }
}

/// A line on stderr about what a command did besides its output
/// ("grant 3: access read-write -> read-only"), escaped (SPEC S29).
func note(_ text: String) {
    FileHandle.standardError.write(Data("scopefs: \(text.escapedForTerminal)\n".utf8))
}

/// Runs a command body, turning people-facing errors into a message on
/// stderr and their documented exit code.
func report(_ body: () throws(CommandError) -> Void) throws {
    do {
        try body()
    } catch {
        // Messages quote names and paths: escaped like every text output (SPEC S29).
        FileHandle.standardError.write(Data("scopefs: \(error.message.escapedForTerminal)\n".utf8))
        throw ExitCode(error.exitCode)
    }
}
