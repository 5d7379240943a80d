import ArgumentParser
import CommandErrors
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

    /// `PROVIDER:RELPATH` arguments: the provider part, with its colon.
    static let items = CompletionKind.custom { words, _, prefix in
        matching(prefix, (try? repository(for: words)?.providers().map { $0.id + ":" }) ?? [])
    }

    /// Grant ids, of the app named on the command line when there is one
    /// (`scopefs revoke APP GRANT`).
    static let grants = CompletionKind.custom { words, _, prefix in
        guard let repository = try? repository(for: words), let all = try? repository.grants(app: nil) else {
            return []
        }
        let apps = Set(all.map(\.app)).intersection(words)
        return matching(prefix, all.filter { apps.isEmpty || apps.contains($0.app) }.map { String($0.id) })
    }

    private static func matching(_ prefix: String, _ candidates: [String]) -> [String] {
        candidates.filter { $0.hasPrefix(prefix) }.sorted()
    }

    /// The repository of the state directory the command line names, or nil
    /// when it has no database yet (opening would not create one).
    private static func repository(for words: [String]) throws(CommandError) -> PolicyRepository? {
        let state = StateDirectory.resolve(explicit: stateOption(in: words))
        guard FileManager.default.fileExists(atPath: state.databasePath) else { return nil }
        return PolicyRepository(database: try PolicyDatabase.open(state))
    }

    static func stateOption(in words: [String]) -> String? {
        for (index, word) in words.enumerated() {
            if word.hasPrefix("--state=") { return String(word.dropFirst("--state=".count)) }
            if word == "--state", index + 1 < words.count { return words[index + 1] }
        }
        return nil
    }
}
