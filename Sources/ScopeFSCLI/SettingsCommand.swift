import ArgumentParser
import CommandErrors
import Foundation
import Launcher
import SettingsPage
import Synchronization

/// `scopefs settings`: the "Files and Folders" page (issue 36, SPEC S46).
struct SettingsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "settings",
        abstract: "Serve the Files and Folders page: every app's grants, revoke with one click, activity.",
        discussion: """
            Prints the page's address with a secret token, new at each start (also in STATE/settings.url, \
            0600), and opens it with xdg-open when there is a desktop. Runs until interrupted.
            """)
    @OptionGroup var options: StateOptions
    @Option(help: "The port on 127.0.0.1 (0: any free one).") var port: Int = 0
    @Option(help: "Serve on this unix socket instead of a port.", completion: .file()) var socket: String?
    @Flag(help: "Only print the address; do not run xdg-open.") var noOpen = false

    func validate() throws {
        guard (0...65535).contains(port) else { throw ValidationError("--port \(port): use 0 to 65535") }
        if socket != nil && port != 0 { throw ValidationError("--socket and --port exclude each other") }
    }

    func run() throws {
        try report { () throws(CommandError) in
            // An app process gets no page: it would be the owner's hand (SPEC S5, S46).
            try OwnerCheck.requireOutsideRuns(to: "serve the settings page")
            try options.requireInitialised()
            let server = SettingsServer(
                state: options.directory, endpoint: socket.map { .unixSocket(path: $0) } ?? .loopback(port: port))
            let open = !noOpen
            let failure = ServerFailure()
            let done = DispatchSemaphore(value: 0)
            Task {
                do {
                    try await server.run { address in
                        print("settings page: \(address)")
                        fflush(nil)  // all streams: stdout is not concurrency-safe to name
                        if open, !address.hasPrefix("unix:") { Browser.open(address) }
                    }
                } catch {
                    failure.set("\(error)")
                }
                done.signal()
            }
            done.wait()
            if let message = failure.message {
                throw CommandError(.ioError, "the settings page could not be served: \(message)")
            }
        }
    }
}

/// Why the server stopped, handed from its task to the command's thread.
final class ServerFailure: Sendable {
    private let text = Mutex<String?>(nil)

    func set(_ message: String) { text.withLock { $0 = message } }
    var message: String? { text.withLock { $0 } }
}

/// The owner's browser, when there is a desktop to show it on.
enum Browser {
    static func open(_ address: String) {
        let environment = ProcessInfo.processInfo.environment
        guard environment["DISPLAY"] != nil || environment["WAYLAND_DISPLAY"] != nil,
            let opener = (environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":").map({ $0 + "/xdg-open" })
                .first(where: { FileManager.default.isExecutableFile(atPath: $0) })
        else { return }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: opener)
        process.arguments = [address]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try? process.run()
    }
}
