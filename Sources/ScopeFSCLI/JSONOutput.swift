import Control
import Foundation
import HostText
import Policy

/// The one JSON style of every `--json` (docs/CLI.md, "JSON output"): keys
/// sorted and in camelCase, slashes not escaped, times as ISO 8601 UTC with
/// milliseconds (`2026-11-23T18:06:34.120Z`), names that are not UTF-8 as
/// `\udcXX` (SPEC S33a). Every command prints through here, so a script
/// reads every command's output the same way.
enum JSONOutput {
    /// One value per command (pretty-printed), or one object per line for
    /// streams (`events`, `query --follow`).
    enum Layout {
        case document
        case line
    }

    static func encoder(_ layout: Layout) -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting =
            layout == .document
            ? [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes] : [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(timeText(date))
        }
        return encoder
    }

    /// A time as every `--json` writes it.
    static func timeText(_ date: Date) -> String {
        date.formatted(
            Date.ISO8601FormatStyle(includingFractionalSeconds: true, timeZone: TimeZone(secondsFromGMT: 0)!))
    }

    static func text<T: Encodable>(_ value: T, _ layout: Layout = .document) -> String {
        // Encoding our own output types cannot fail: a failure is a bug.
        guard let data = try? encoder(layout).encode(value) else {
            preconditionFailure("cannot encode \(T.self) as JSON")
        }
        return String(decoding: data, as: UTF8.self).jsonHostEscaped
    }
}

/// Prints one command's result in the style of `JSONOutput`.
func printJSON<T: Encodable>(_ value: T) {
    print(JSONOutput.text(value))
}

/// A time kept as seconds since 1970 (the database's form), as `JSONOutput`
/// writes it.
func jsonTime(_ seconds: Double) -> Date {
    Date(timeIntervalSince1970: seconds)
}

/// An event as `events --json` and `status --json` print it: the stored
/// event with its times as ISO 8601 and its errno also by name.
struct EventJSON: Encodable {
    var id: Int64?
    var time: Date
    var kind: String
    var app: String?
    /// The app's display name (`app add --name`), when the app is known.
    var appName: String?
    var pid: Int32?
    var path: String?
    var operation: String?
    var errno: Int32?
    var errnoName: String?
    var grant: Int64?
    var count: Int?
    var occurrences: Int
    var lastTime: Date?

    init(_ event: Event, appName: String? = nil) {
        id = event.id
        time = jsonTime(event.time)
        kind = event.kind.rawValue
        app = event.app
        self.appName = appName
        pid = event.pid
        path = event.path
        operation = event.operation
        errno = event.errno
        errnoName = event.errno.map(Event.errnoName)
        grant = event.grant
        count = event.count
        occurrences = event.occurrences
        lastTime = event.lastTime.map(jsonTime)
    }
}

/// A grant as `privacy --json` and every command that makes or changes
/// grants print it (SPEC S16).
struct GrantJSON: Encodable {
    var grant: Int64
    var app: String
    var appName: String?
    var provider: String
    var path: String
    /// "file" or "folder".
    var kind: String
    var access: String
    var state: String
    var grantedAt: Date
    /// "persistent" or "session".
    var lifetime: String
    /// The grant's provider's extension, as the daemon runs it now (its
    /// state, queue and errors); absent for a local folder or without a daemon.
    var providerExtension: ProviderExtensionStatus?

    init(_ grant: Grant, appName: String? = nil, providerExtension: ProviderExtensionStatus? = nil) {
        self.providerExtension = providerExtension
        self.grant = grant.id
        app = grant.app
        self.appName = appName
        provider = grant.provider
        path = grant.relativePath
        kind = grant.isDirectory ? "folder" : "file"
        access = grant.access.rawValue
        state = grant.state.rawValue
        grantedAt = jsonTime(grant.grantedAt)
        lifetime = grant.isSession ? "session" : "persistent"
    }
}
