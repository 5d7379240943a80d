import ArgumentParser
import CommandErrors
import Control
import Daemon
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
        if let unknown = UsageHints.unknownCommand(in: arguments) {
            FileHandle.standardError.write(Data((unknown + "\n").utf8))
            Foundation.exit(ExitCode.validationFailure.rawValue)
        }
        do {
            var command = try parseAsRoot(arguments)
            try command.run()
        } catch {
            // A host path where PROVIDER:RELPATH belongs: say its provider form.
            if let hint = UsageHints.providerRelativeForm(for: error, arguments: arguments) {
                FileHandle.standardError.write(Data((fullMessage(for: error) + "\n" + hint + "\n").utf8))
                Foundation.exit(exitCode(for: error).rawValue)
            }
            exit(withError: error)
        }
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

    /// Exit 78 with the `init` line for a state directory never
    /// initialised, as every command that opens the store does (issue 50:
    /// `run` said "no daemon", `settings` served a page of nothing). A
    /// daemon that serves the directory is left to answer: it fails closed
    /// when the database is gone, and says so; so is one behind a control
    /// socket alone (a sandbox's state directory shows nothing else).
    func requireInitialised() throws(CommandError) {
        guard !DaemonLock.isHeld(directory), !FileManager.default.fileExists(atPath: directory.controlSocketPath)
        else { return }
        _ = try backend().localDatabase()
    }

    /// Which store this state directory is on, decided by its owner (issue 51).
    func backend() throws(CommandError) -> IsolationBackend { try IsolationBackend(directory) }

    /// The SQLite repository (on a fleet, this host's log and journal only).
    func repository() throws(CommandError) -> PolicyRepository {
        let repository = try IsolationBackend(directory).localRepository()
        // What a killed import/export/move left staged (SPEC S34).
        PartialCopies(state: directory).sweep()
        return repository
    }

    /// The isolation layer this state directory is on, for reading: the
    /// fleet's store once `init --database` put it there (issue 34),
    /// else its own SQLite file.
    func isolationStore() throws(CommandError) -> any IsolationStore {
        let backend = try backend()
        PartialCopies(state: directory).sweep()  // what a killed import/export/move left staged (SPEC S34)
        return try backend.reader()
    }

    /// The fleet's store, logged in as `fleet.json` says; nil when the
    /// isolation layer is the SQLite file.
    func fleetStore() throws(CommandError) -> FleetRepository? {
        let backend = try backend()
        guard backend.isFleet else { return nil }
        PartialCopies(state: directory).sweep()  // as `repository()` does (SPEC S34)
        return try backend.fleetRepository()
    }

    /// The isolation layer for a command that registers or removes apps
    /// and providers, grants in bulk or picks, whichever store it is: refused
    /// with exit 77 inside an app process (SPEC S5). On a fleet, the
    /// database refuses it too unless `fleet.json` logs in as the owner's
    /// role (a host's role may not change the policy, SECURITY.md).
    func storeForChange(_ action: String) throws(CommandError) -> any IsolationStore {
        try OwnerCheck.require(directory, to: action)
        let backend = try backend()
        PartialCopies(state: directory).sweep()  // as `repository()` does (SPEC S34)
        return try backend.store()
    }

    /// The fleet's store for a change, which this host's log records too
    /// (`FleetStoreWithLocalLog`); nil when the isolation layer is the SQLite file.
    func fleetStoreForChange() throws(CommandError) -> FleetStoreWithLocalLog? {
        let backend = try backend()
        guard backend.isFleet else { return nil }
        PartialCopies(state: directory).sweep()  // as `repository()` does (SPEC S34)
        return try backend.fleetRepositoryForChange()
    }

    /// The SQLite repository, for a command that works on it alone (test
    /// runs, chaos): refused with exit 77 inside an app process (SPEC S5),
    /// and with exit 78 on a fleet (`refuseFleetChange`).
    func repositoryForChange(_ action: String) throws(CommandError) -> PolicyRepository {
        try OwnerCheck.require(directory, to: action)
        try refuseFleetChange(action)
        return try repository()
    }

    /// One of the owner's policy commands, through the daemon when one
    /// serves the state directory, else against the store here
    /// (`ControlClient.policy`). A run's cgroup is checked first, so an
    /// app process reads the same refusal either way (SPEC S5).
    ///
    /// On a fleet the change is written here, with the owner's role: the
    /// daemon's role is a host's, which may not grant. It is committed
    /// before anything else happens, and the daemon serving this state
    /// directory installs it before this returns (SPEC S13), as every
    /// other host's does on the store's notification (SPEC S44).
    func policy(_ command: ControlCommand, _ action: String) throws(CommandError) -> ControlResponse {
        try OwnerCheck.requireOutsideRuns(to: action)
        if let fleet = try fleetStoreForChange() {
            try OwnerCheck.require(directory, to: action)
            let response = try OwnerPolicy.apply(command, repository: fleet, state: directory)
            try ControlClient.notifyChange(state: directory)
            return response
        }
        // The local path runs only when no daemon answers, so the daemon's
        // `whoami` (the rest of `repositoryForChange`'s check) has nothing to add.
        return try ControlClient.policy(command, state: directory) { () throws(CommandError) in try repository() }
    }
}

extension StateOptions {
    /// Whether `init --database` or a fleet mount put this state
    /// directory's isolation layer in a fleet's store (`fleet.json`).
    var isOnFleet: Bool { IsolationBackend.isFleet(directory) }

    /// What works on the SQLite store alone (test runs and chaos, whose
    /// events and direct daemon commands are one host's): refused on a
    /// fleet rather than
    /// served from a file no other host, and no grant of the fleet's,
    /// would see (SPEC S44).
    func refuseFleetChange(_ action: String) throws(CommandError) {
        try IsolationBackend.refuseFleet(directory, action)
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
