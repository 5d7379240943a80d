import CommandErrors
import Documents
import Foundation
import Glibc
import HostText
import Policy
import PolicyStore

/// `scopefs query --follow` (issue 17): a live NSMetadataQuery. It prints
/// the initial result and "finished gathering", then each addition, removal
/// and change as the app's documents change, keyed by where the document
/// lives in the container.
struct QueryFollower {
    let query: DocumentQuery
    let app: String
    let scope: DocumentQuery.SearchScope
    let name: String?
    let mount: String?
    let json: Bool
    /// How often the documents are listed again; well under the second a
    /// change should take to be seen.
    static let period: useconds_t = 300_000

    func run() throws(CommandError) -> Never {
        var known = try current()
        if json {
            emit(
                Update(
                    event: "finishedGathering",
                    results: known.values.sorted { $0.urlInLocalContainer < $1.urlInLocalContainer }))
        } else {
            for result in known.values.sorted(by: { $0.urlInLocalContainer < $1.urlInLocalContainer }) {
                line("result", result)
            }
            print("finished gathering: \(known.count)")
        }
        fflush(nil)
        while true {
            usleep(Self.period)
            let now = try current()
            for (key, result) in now.sorted(by: { $0.key < $1.key }) where known[key] != result {
                report(known[key] == nil ? "added" : "changed", result)
            }
            for (key, result) in known.sorted(by: { $0.key < $1.key }) where now[key] == nil {
                report("removed", result)
            }
            known = now
            fflush(nil)
        }
    }

    private func current() throws(CommandError) -> [String: DocumentQuery.Result] {
        let results = try query.run(app: app, scope: scope, nameGlob: name, mount: mount)
        return Dictionary(results.map { ($0.urlInLocalContainer, $0) }, uniquingKeysWith: { a, _ in a })
    }

    /// One line of `query --follow --json`: the initial result with
    /// `finishedGathering`, then one result per addition, change, removal.
    private struct Update: Encodable {
        var event: String
        var result: DocumentQuery.Result?
        var results: [DocumentQuery.Result]?
    }

    private func report(_ event: String, _ result: DocumentQuery.Result) {
        if json { emit(Update(event: event, result: result)) } else { line(event, result) }
    }

    private func line(_ event: String, _ result: DocumentQuery.Result) {
        print(
            [event, result.urlInLocalContainer.escapedForTerminal, "->", result.url.escapedForTerminal].joined(
                separator: "\t"))
    }

    private func emit(_ update: Update) {
        print(JSONOutput.text(update, .line))
    }
}
