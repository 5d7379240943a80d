import ArgumentParser
import CommandErrors
import FleetStore
import Foundation
import Policy
import PolicyStore

/// Shell completion of the ids a state directory knows: the shell runs
/// `scopefs` with the words typed so far, and these closures read the
/// database named by `--state` among them (else $SCOPEFS_STATE and the
/// default). Completion never creates a state directory and prints nothing
/// when there is none.
enum Completions {
    static let apps = CompletionKind.custom { words, _, prefix in
        matching(prefix, (try? repository(for: words)?.apps().map(\.id)) ?? [])
    }

    static let providers = CompletionKind.custom { words, _, prefix in
        matching(prefix, (try? repository(for: words)?.providers().map(\.id)) ?? [])
    }

    /// `PROVIDER:RELPATH` arguments: the provider part, with its colon, and
    /// after it the items in the provider's folder (`local:No` ->
    /// `local:Novel/`), as the owner sees them on the host. The bash script
    /// (`CompletionScripts`) hands the word over whole, colon included.
    static let items = CompletionKind.custom { words, _, prefix in
        guard let providers = try? repository(for: words)?.providers() else { return [] }
        return offered(ItemPathCompletion.candidates(for: prefix, providers: providers))
    }

    /// Grant ids, of the app named on the command line when there is one
    /// (`scopefs revoke APP GRANT`); a word that is not a number yet is an
    /// item, `PROVIDER:RELPATH`, completed among those grants' items. An
    /// empty word offers both, so the list shows which item each grant is
    /// (issue 50: bare ids said nothing).
    static let grants = CompletionKind.custom { words, _, prefix in
        guard let repository = try? repository(for: words), let all = try? repository.grants(app: nil) else {
            return []
        }
        let apps = Set(all.map(\.app)).intersection(words)
        let held = all.filter { apps.isEmpty || apps.contains($0.app) }
        let ids = held.map { String($0.id) }
        let items = held.map { "\($0.provider):\($0.relativePath.isEmpty ? "." : $0.relativePath)" }
        if prefix.isEmpty { return matching(prefix, ids + items) }
        return matching(prefix, prefix.allSatisfy(\.isNumber) ? ids : items)
    }

    /// `fault add --op`: the operations a rule can name, from the rules' own list.
    static let faultOperations = CompletionKind.list(FaultRule.operations.sorted())

    /// `fault add --errno`: the errno names a rule can inject.
    static let faultErrnos = CompletionKind.list(FaultRule.errnoNames.map(\.name))

    /// `chaos --fault OP:ERRNO[:P%]`: the operation, then the errno after its colon.
    static let faultShorthand = CompletionKind.custom { _, _, prefix in shorthand(prefix, errnos: true) }

    /// `chaos --latency OP:MSms[:P%]`: the operation (the time is the user's).
    static let latencyShorthand = CompletionKind.custom { _, _, prefix in shorthand(prefix, errnos: false) }

    private static func shorthand(_ prefix: String, errnos: Bool) -> [String] {
        guard let colon = prefix.firstIndex(of: ":") else {
            return matching(prefix, FaultRule.operations.sorted().map { $0 + ":" })
        }
        guard errnos, !prefix[prefix.index(after: colon)...].contains(":") else { return [] }
        return matching(prefix, FaultRule.errnoNames.map { "\(prefix[..<colon]):\($0.name)" })
    }

    private static func matching(_ prefix: String, _ candidates: [String]) -> [String] {
        offered(candidates.filter { $0.hasPrefix(prefix) }.sorted())
    }

    /// The candidates as the requesting shell reads them. Bash's script
    /// passes them through `compgen -W`, which expands each word as the
    /// shell would: a file named `$(reboot)` in a provider's folder would
    /// run. So for bash every character but a few plain ones is escaped
    /// with a backslash, which compgen's quote removal takes off again;
    /// a name with a newline, which the list cannot hold, is left out.
    static func offered(_ candidates: [String]) -> [String] {
        guard CompletionShell.requesting == .bash else { return candidates }
        return candidates.filter { !$0.contains("\n") }.map { candidate in
            candidate.map { character in
                character.isLetter && character.isASCII || character.isNumber && character.isASCII
                    || "-_./:@%+=,".contains(character) ? String(character) : "\\" + String(character)
            }.joined()
        }
    }

    /// The isolation layer of the state directory the command line names
    /// (on a fleet, its store), or nil when it has no database yet (opening
    /// would not create one).
    private static func repository(for words: [String]) throws(CommandError) -> (any IsolationStore)? {
        let state = StateDirectory.resolve(explicit: stateOption(in: words))
        guard IsolationBackend.isInitialised(state) else { return nil }
        // A TAB press waits for this: a server away costs half a second
        // and no candidates, not the commands' timeout.
        return try IsolationBackend(state).reader(timeout: fleetTimeout)
    }

    static let fleetTimeout = 0.5

    static func stateOption(in words: [String]) -> String? {
        for (index, word) in words.enumerated() {
            if word.hasPrefix("--state=") { return String(word.dropFirst("--state=".count)) }
            if word == "--state", index + 1 < words.count { return words[index + 1] }
        }
        return nil
    }
}
