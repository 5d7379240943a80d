import ArgumentParser
import Daemon
import Foundation
import Policy
import PolicyStore

struct RunCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run", abstract: "Run a command as an app process; exits with the command's status (SPEC S5).")
    @OptionGroup var options: StateOptions
    @Option(help: "The app to run as.") var app: String
    @Flag(help: "Private mount namespace: only the app's directory, at /sandbox, with HOME at its container.")
    var sandbox = false
    @Flag(
        help: """
            Use the mount as every process sees it. By default (as root) the app gets a mount namespace \
            where MOUNT holds only MOUNT/<app>, which saves a lookup per path walk.
            """)
    var sharedView = false
    @Argument(parsing: .captureForPassthrough, help: "The command and its arguments (after --).") var command: [String]

    func validate() throws {
        if command.drop(while: { $0 == "--" }).isEmpty { throw ValidationError("name a command to run after --") }
        if sandbox && sharedView { throw ValidationError("--sandbox and --shared-view exclude each other") }
    }

    func run() throws {
        var command = self.command
        if command.first == "--" { command.removeFirst() }
        var status: Int32 = 0
        try report { () throws(ScopeFSError) in
            let view: MountView = sandbox ? .sandbox : sharedView ? .shared : .app
            status = try AppLauncher.run(app: app, command: command, view: view, state: options.directory)
        }
        throw ExitCode(status)
    }
}

struct StatusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status", abstract: "The mount and the live app processes (SPEC S30).")
    @OptionGroup var options: StateOptions
    @Flag(help: "Print JSON.") var json = false

    struct Report: Encodable {
        var stateDirectory: String
        var daemon: DaemonStatus?
        var recentLeaks: [Event]
    }

    func run() throws {
        try report { () throws(ScopeFSError) in
            let database = try PolicyDatabase.open(options.directory)
            let status = try ControlClient.status(state: options.directory)
            let leaks = try EventStore(database: database).events(.init(kinds: [.leak], limit: 20))
            if json { return printJSON(Report(stateDirectory: options.directory.path, daemon: status, recentLeaks: leaks)) }
            if let status {
                print("mounted at \(status.mountpoint.escapedForTerminal) by daemon \(status.pid)")
                print("  scopes: \(status.scopes), budget \(status.scopeBudget); open files on revoke: \(status.openFiles); inodes: \(status.inodes)")
                print("app processes: \(status.processes.count)")
                for process in status.processes { print(Self.describe(process)) }
            } else {
                print("no daemon serves \(options.directory.path.escapedForTerminal)")
            }
            print("recent leaks: \(leaks.count)")
            for leak in leaks { print("  " + EventsCommand.line(leak)) }
        }
    }

    static func describe(_ process: DaemonStatus.AppProcessStatus) -> String {
        var text = "  \(process.pid)\t\(process.app.escapedForTerminal)\(process.parent.map { "\tchild of \($0)" } ?? "")"
        text += "\tbudget used \(process.budgetUsed)\(process.budgetExhausted ? " (exhausted)" : "")"
        for scope in process.scopes { text += "\n      grant \(scope.grant) x\(scope.count)\t\(scope.path.escapedForTerminal)" }
        return text
    }
}
