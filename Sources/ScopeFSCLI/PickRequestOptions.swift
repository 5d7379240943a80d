import ArgumentParser
import CommandErrors
import Control
import Foundation
import Glibc
import HostText
import PolicyStore

/// `scopefs pick --request ...` from inside an app (issue 17): the app's
/// side of app-initiated picking, for shells and scripts. The request goes
/// over the app endpoint; the owner's agent answers.
struct PickRequestOptions: ParsableArguments {
    @Flag(help: "From inside an app: ask the owner's picker agent instead of showing a picker.") var request = false
    @Option(
        name: .customLong("type"),
        help: "An allowed content type (UTType or MIME); repeat for several. Other files are dimmed.")
    var types: [String] = []
    @Flag(help: "open, import: choose several items (Space toggles, Enter confirms); with --request, allow several.")
    var multiple = false
    @Option(help: "Where the picker starts, as PROVIDER:DIR.", completion: Completions.items) var start: String?
    @Option(help: "--request: seconds to wait for the answer.") var timeout: Double = 300
    @Argument(help: "--request with --mode export or move: the container items to place.") var items: [String] = []

    func validate(mode: PickerMode) throws {
        if (mode == .export || mode == .move) && items.isEmpty {
            throw ValidationError("--mode \(mode.rawValue) --request needs the container items to place")
        }
        if timeout <= 0 { throw ValidationError("--timeout must be above 0") }
    }

    func send(mode: PickerMode, state: StateDirectory) throws {
        var answer: PickAnswer?
        try report { () throws(CommandError) in
            let request = PickRequest(
                mode: PickRequest.Mode(rawValue: mode.rawValue) ?? .open, contentTypes: types,
                allowsMultipleSelection: multiple, directory: start, items: items)
            let response = try ControlClient.send(
                .pick(request, wait: timeout), state: state, timeoutSeconds: Int(timeout.rounded(.up)) + 5)
            guard response.ok, let picked = response.picked else {
                // Export, move: the items placed before one failed.
                Self.printPaths(response.picked?.paths ?? [])
                throw CommandError(
                    CommandError.Kind(rawValue: response.code ?? 70) ?? .internalError,
                    response.message ?? "the pick failed")
            }
            answer = picked
        }
        guard let answer, !answer.cancelled else {
            FileHandle.standardError.write(Data("scopefs: cancelled\n".utf8))
            throw ExitCode(PickCommand.cancelled)
        }
        Self.printPaths(answer.paths)
    }

    /// Paths in this app's view: under $SCOPEFS_MOUNT inside `scopefs run`.
    private static func printPaths(_ paths: [String]) {
        let root = ProcessInfo.processInfo.environment["SCOPEFS_MOUNT"].map { $0 + "/" } ?? ""
        for path in paths { print((root + path).escapedForTerminal) }
    }
}
