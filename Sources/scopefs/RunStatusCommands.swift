import ArgumentParser
import Daemon
import Foundation
import PolicyStore

struct RunCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run", abstract: "Run a command as an app process; exits with the command's status (SPEC S5).")
    @OptionGroup var options: StateOptions
    @Option(help: "The app to run as.") var app: String
    @Flag(help: "Private mount namespace: only the app's directory, at /sandbox, with HOME at its container.")
    var sandbox = false
    @Argument(parsing: .captureForPassthrough, help: "The command and its arguments (after --).") var command: [String]

    func validate() throws {
        if command.drop(while: { $0 == "--" }).isEmpty { throw ValidationError("name a command to run after --") }
    }

    func run() throws {
        var command = self.command
        if command.first == "--" { command.removeFirst() }
        var status: Int32 = 0
        try report { () throws(ScopeFSError) in
            status = try AppLauncher.run(app: app, command: command, sandbox: sandbox, state: options.directory)
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
    }

    func run() throws {
        try report { () throws(ScopeFSError) in
            _ = try PolicyDatabase.open(options.directory)
            let status = try ControlClient.status(state: options.directory)
            if json { return printJSON(Report(stateDirectory: options.directory.path, daemon: status)) }
            guard let status else { return print("no daemon serves \(options.directory.path)") }
            print("mounted at \(status.mountpoint) by daemon \(status.pid) (open files: \(status.openFiles), inodes: \(status.inodes))")
            print("app processes: \(status.processes.count)")
            for process in status.processes {
                print("  \(process.pid)\t\(process.app)\(process.parent.map { "\tchild of \($0)" } ?? "")")
            }
        }
    }
}
