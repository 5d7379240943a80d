import ArgumentParser
import FleetStore
import Foundation
import HostText
import Policy
import PolicyStore

/// What the command line adds to a usage error for the mistakes people
/// make (issue 50, finding 4): a mistyped command ("did you mean", as
/// mistyped options already get), and a host path where a provider's item,
/// `PROVIDER:RELPATH`, belongs.
enum UsageHints {
    /// The error for the first word that is no command where one is
    /// expected (`scopefs grnat`, `scopefs provider ad`), with the nearest
    /// commands; nil when the words name commands, or an option comes
    /// first (the parser's own messages say the rest).
    static func unknownCommand(in arguments: [String]) -> String? {
        var command: ParsableCommand.Type = ScopeFSCommand.self
        var words = arguments[...]
        var path = ["scopefs"]
        while let word = words.first {
            words = words.dropFirst()
            if word == "--state" {
                words = words.dropFirst()
                continue
            }
            if word.hasPrefix("-") || word == "help" { return nil }
            let subcommands = command.configuration.subcommands
            if subcommands.isEmpty { return nil }
            if let next = subcommands.first(where: { names(of: $0).contains(word) }) {
                command = next
                path.append(word)
                continue
            }
            let offered = subcommands.filter { $0.configuration.shouldDisplay }.map(name(of:))
            let near = offered.filter { distance(word, $0) <= max(1, min(2, word.count / 3)) || $0.hasPrefix(word) }
            let guess = near.isEmpty ? "" : "; did you mean \(near.map { "'\($0)'" }.joined(separator: " or "))?"
            return """
                Error: unknown command '\(word.escapedForTerminal)' for '\(path.joined(separator: " "))'\(guess)
                The commands: \(offered.joined(separator: ", ")).
                See '\(path.joined(separator: " ")) --help' for more information.
                """
        }
        return nil
    }

    /// A hint for a `PROVIDER:RELPATH` argument given as a host path
    /// (`scopefs grant APP ~/Documents/Novel`): the provider-relative form
    /// of that path when a provider's folder holds it, else how the form
    /// reads. nil when the error is about something else.
    static func providerRelativeForm(for error: Error, arguments: [String]) -> String? {
        let message = ScopeFSCommand.message(for: error)
        guard message.contains("<provider:relpath>") || message.contains("<provider:dir>"),
            let value = quotedValue(in: message), !value.isEmpty, ItemReference(argument: value) == nil
        else { return nil }
        let general = "Hint: an item is PROVIDER:RELPATH, relative to a provider's folder (`scopefs provider list`)"
        let state = StateDirectory.resolve(explicit: Completions.stateOption(in: arguments))
        // The isolation layer's providers: on a fleet, its store's (issue 51).
        guard IsolationBackend.isInitialised(state),
            let providers = try? IsolationBackend(state).reader(timeout: Completions.fleetTimeout).providers()
        else { return general }
        let path = HostPathArgument.absolute(value)
        // By bytes: names that differ only by normalisation are other folders.
        let bytes = path.hostBytes
        for provider in providers.sorted(by: { $0.directory.hostBytes.count > $1.directory.hostBytes.count }) {
            let folder = provider.directory.hostBytes
            if bytes == folder { return "Hint: that is \(provider.id):. (the provider's root)".escapedForTerminal }
            if bytes.starts(with: folder + [UInt8(ascii: "/")]) {
                let relative = String(hostBytes: bytes.dropFirst(folder.count + 1))
                return "Hint: that is \(provider.id):\(relative) (PROVIDER:RELPATH, relative to the provider's folder)"
                    .escapedForTerminal
            }
        }
        return general + "; no provider's folder holds \(path.escapedForTerminal)"
    }

    /// The value an ArgumentParser message quotes: "The value 'X' is invalid".
    private static func quotedValue(in message: String) -> String? {
        guard let start = message.range(of: "The value '"),
            let end = message.range(of: "' is invalid", range: start.upperBound..<message.endIndex)
        else { return nil }
        return String(message[start.upperBound..<end.lowerBound])
    }

    private static func name(of command: ParsableCommand.Type) -> String {
        command.configuration.commandName ?? command._commandName
    }

    private static func names(of command: ParsableCommand.Type) -> [String] {
        [name(of: command)] + command.configuration.aliases
    }

    /// Edit distance, by characters, a swap of two neighbours counting as
    /// one edit (optimal string alignment): `grnat` is one from `grant`.
    static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a)
        let b = Array(b)
        guard !a.isEmpty, !b.isEmpty else { return max(a.count, b.count) }
        var table = [[Int]](repeating: [Int](repeating: 0, count: b.count + 1), count: a.count + 1)
        for i in 0...a.count { table[i][0] = i }
        for j in 0...b.count { table[0][j] = j }
        for i in 1...a.count {
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                table[i][j] = min(table[i - 1][j] + 1, table[i][j - 1] + 1, table[i - 1][j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    table[i][j] = min(table[i][j], table[i - 2][j - 2] + 1)
                }
            }
        }
        return table[a.count][b.count]
    }
}

/// A path made absolute the way the shell's user means it: `~` is the home
/// folder, a relative path is against the working directory.
enum HostPathArgument {
    static func absolute(_ value: String) -> String {
        let expanded = value == "~" || value.hasPrefix("~/") ? NSHomeDirectory() + value.dropFirst() : value
        let absolute = expanded.hasPrefix("/") ? expanded : FileManager.default.currentDirectoryPath + "/" + expanded
        let resolved = HostFiles.realPath(absolute) ?? absolute
        return resolved.count > 1 && resolved.hasSuffix("/") ? String(resolved.dropLast()) : resolved
    }
}
