import ArgumentParser
import CommandErrors
import Control
import Foundation
import HostText
import PolicyStore
import ProviderExtensions

/// `scopefs pin`, `unpin`, `evict` and `provider sync`: the owner's hand on
/// an extension provider's downloaded content (SPEC S41, S42), through the
/// daemon that runs the extension.
enum ContentCommands {
    static func send(_ action: ContentAction, provider: String, path: String?, state: StateDirectory)
        throws(CommandError)
    {
        let response = try ControlClient.send(
            .providerContent(provider: provider, action: action, path: path), state: state, timeoutSeconds: 300)
        guard response.ok else {
            throw CommandError(
                CommandError.Kind(rawValue: response.code ?? 70) ?? .internalError,
                response.message ?? "\(action.rawValue) failed")
        }
        if let message = response.message { print(message.escapedForTerminal) }
    }
}

struct PinCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pin",
        abstract:
            "Keep an extension provider's file (or every file of a folder) downloaded: fetch it now, never evict it.")
    @OptionGroup var options: StateOptions
    @Argument(
        help: ArgumentHelp("The item, as PROVIDER:RELPATH.", valueName: "provider:relpath"),
        completion: Completions.items)
    var item: ItemReference

    func run() throws {
        try report { () throws(CommandError) in
            try ContentCommands.send(.pin, provider: item.provider, path: item.path, state: options.directory)
        }
    }
}

struct UnpinCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unpin", abstract: "Let the cache's quota evict a pinned item again.")
    @OptionGroup var options: StateOptions
    @Argument(
        help: ArgumentHelp("The item, as PROVIDER:RELPATH.", valueName: "provider:relpath"),
        completion: Completions.items)
    var item: ItemReference

    func run() throws {
        try report { () throws(CommandError) in
            try ContentCommands.send(.unpin, provider: item.provider, path: item.path, state: options.directory)
        }
    }
}

struct EvictCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "evict",
        abstract:
            "Drop the downloaded content of an extension provider's item (it stays, dataless); not a file that is open or not uploaded (exit 77)."
    )
    @OptionGroup var options: StateOptions
    @Argument(
        help: ArgumentHelp("The item, as PROVIDER:RELPATH ('.' for everything).", valueName: "provider:relpath"),
        completion: Completions.items)
    var item: ItemReference

    func run() throws {
        try report { () throws(CommandError) in
            try ContentCommands.send(.evict, provider: item.provider, path: item.path, state: options.directory)
        }
    }
}

/// The daemon's child that makes remote changes in a replica folder
/// (`ReplicaWriterProcess`): not for people.
struct ReplicaWriterCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replica-writer", abstract: "Internal: the daemon's writer of remote changes.",
        shouldDisplay: false)
    @Argument var root: String

    func run() throws {
        throw ExitCode(ReplicaWriterServer.serve(root: root))
    }
}
