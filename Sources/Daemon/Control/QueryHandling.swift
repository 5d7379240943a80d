import CommandErrors
import Control
import Documents
import Foundation
import Policy
import PolicyStore

/// An app's live query (issue 17, like NSMetadataQuery): the `query`
/// request lists the sender's own documents — the app is the peer's, never
/// named in the request, so no app sees another's — with paths in its view.
/// With `digest` (what the client last saw) and `waitSeconds`, it is a long
/// poll: the answer comes when the results differ from that, or when the
/// wait ends. The client libraries turn successive answers into "finished
/// gathering", then additions, removals and changes, as `query --follow`.
enum QueryHandling {
    static let longestWait: Double = 10
    /// How often a waiting query lists the documents again: references are
    /// files in the container, which change without a policy install.
    static let period: Double = 0.3

    static func handle(
        app: AppID, scope scopeName: String?, name: String?, digest lastDigest: String?, wait: Double?,
        state: StateDirectory, snapshot: () -> PolicySnapshot
    ) -> ControlResponse {
        guard let scope = DocumentQuery.SearchScope(rawValue: scopeName ?? "all") else {
            return .failure(CommandError.Kind.usage.rawValue, "query scope must be documents, external or all")
        }
        let deadline = Date().addingTimeInterval(min(max(wait ?? 0, 0), longestWait))
        while true {
            let results = DocumentQuery.results(
                app: app, scope: scope, nameGlob: name, snapshot: snapshot(), state: state, prefix: "")
            let digest = Self.digest(results)
            if digest != lastDigest || Date() >= deadline {
                var response = ControlResponse(ok: true)
                response.results = results
                response.digest = digest
                return response
            }
            Thread.sleep(forTimeInterval: min(period, max(deadline.timeIntervalSinceNow, 0)))
        }
    }

    /// FNV-1a over the encoded results: equal results, equal digests (keys
    /// sorted: the encoder's order of keys is not stable otherwise).
    static func digest(_ results: [DocumentQuery.Result]) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let bytes = (try? encoder.encode(results)) ?? Data()
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        return String(hash, radix: 16)
    }
}
