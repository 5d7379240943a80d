import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

// What the user does to the app while it runs: the helpers of the pytest
// plugin (`revoke()`, `restore()`, `rename_on_host()`, `inject()`, ...),
// each one `scopefs` command as the owner or one change in a provider's
// folder.

extension ScopeFSMount {
    /// The id of the app's grant of exactly this item (`scopefs privacy --json`).
    public func grantID(_ item: String, app: String? = nil) throws(ScopeFSTestingError) -> Int {
        let app = app ?? self.app
        let (provider, relative) = Self.split(item)
        let rows = try decode([GrantRow].self, from: cli(["privacy", app, "--json"]))
        guard let row = rows.first(where: { $0.provider == provider && $0.path == relative }) else {
            throw .badItem("\(app) has no grant of \(item)")
        }
        return row.grant
    }

    /// Revokes the app's grant of the item: in force for the app's very
    /// next operation, and descriptors it opened before are cut with
    /// `openFiles: .revoke` (SPEC S13, S14).
    public func revoke(_ item: String, app: String? = nil) throws(ScopeFSTestingError) {
        try cli(["revoke", app ?? self.app, String(try grantID(item, app: app))])
    }

    /// Restores a revoked grant (SPEC S15).
    public func restore(_ item: String, app: String? = nil) throws(ScopeFSTestingError) {
        try cli(["restore", app ?? self.app, String(try grantID(item, app: app))])
    }

    /// Removes the grant for good, with the app's reference documents to it.
    public func forget(_ item: String, app: String? = nil) throws(ScopeFSTestingError) {
        try cli(["forget", app ?? self.app, String(try grantID(item, app: app))])
    }

    /// Renames (or moves) an item in its provider's folder, behind the
    /// mount's back, as another program of the user would: rename(2), the
    /// destination's folders made first. The item keeps its identifier, so
    /// grants and bookmarks follow it (SPEC S26).
    public func renameOnHost(_ source: String, to destination: String) throws(ScopeFSTestingError) {
        let from = try hostPath(source)
        let to = try hostPath(destination)
        try makeParent(of: to)
        guard rename(from, to) == 0 else {
            throw .hostFileFailed("cannot rename \(from) to \(to): \(String(cString: strerror(errno)))")
        }
    }

    /// Writes a file in its provider's folder (its folders made first), as
    /// another program of the user would.
    public func writeOnHost(_ item: String, _ content: String) throws(ScopeFSTestingError) {
        try writeOnHost(item, Data(content.utf8))
    }

    /// Writes a file in its provider's folder (its folders made first).
    public func writeOnHost(_ item: String, _ content: Data) throws(ScopeFSTestingError) {
        let path = try hostPath(item)
        try makeParent(of: path)
        guard FileManager.default.createFile(atPath: path, contents: content) else {
            throw .hostFileFailed("cannot write \(path)")
        }
    }

    /// Adds a fault rule for the app (`scopefs fault add`): its `operation`
    /// requests (`open`, `read`, `write`, `create`, `rename`, `getattr`,
    /// `readdir`, ... or `*`) on paths matching the glob `path` in the
    /// app's view (`Providers/local/docs/*`, see `pathInApp`; nil: every
    /// path) meet `fault`, in `percent` % of the cases (nil: all). Returns
    /// the rule's id, for `clearFaults(_:)`.
    @discardableResult
    public func inject(
        _ operation: String, _ fault: Fault, path: String? = nil, percent: Double? = nil, app: String? = nil,
        seed: Int? = nil
    ) throws(ScopeFSTestingError) -> Int {
        var arguments = ["fault", "add", "--app", app ?? self.app, "--op", operation, "--json"]
        switch fault {
        case .errno(let name): arguments += ["--errno", name]
        case .latency(let milliseconds): arguments += ["--latency", String(milliseconds)]
        }
        if let path { arguments += ["--path", path] }
        if let percent { arguments += ["--percent", String(percent)] }
        if let seed { arguments += ["--seed", String(seed)] }
        struct Rule: Decodable { let id: Int }
        return try decode(Rule.self, from: cli(arguments)).id
    }

    /// Removes one fault rule, or all of them (`scopefs fault clear`).
    public func clearFaults(_ rule: Int? = nil) throws(ScopeFSTestingError) {
        try cli(["fault", "clear"] + (rule.map { [String($0)] } ?? ["--all"]))
    }

    /// The app's events (`scopefs events --json`), oldest first: `denial`,
    /// `start`, `stop`, `unbalanced-stop`, `leak`, `fault`, `revoke`,
    /// `stale-bookmark`, ... (SPEC S29). `kind` takes one kind or several,
    /// comma-separated. The daemon writes events every 100 ms: to wait for
    /// one, use `waitForEvents`.
    public func events(kind: String? = nil, app: String? = nil) throws(ScopeFSTestingError) -> [ScopeFSEvent] {
        let arguments = ["events", "--app", app ?? self.app, "--json"] + (kind.map { ["--kind", $0] } ?? [])
        let result = try cli(arguments)
        var events: [ScopeFSEvent] = []
        for line in result.output.split(separator: "\n") where !line.isEmpty {
            guard let event = try? JSONDecoder().decode(ScopeFSEvent.self, from: Data(line.utf8)) else {
                throw .unexpectedOutput(command: "scopefs " + arguments.joined(separator: " "), output: String(line))
            }
            events.append(event)
        }
        return events
    }

    /// The app's denials (SPEC S29), of one operation (`open`, `read`, ...) or all.
    public func denials(operation: String? = nil, app: String? = nil) throws(ScopeFSTestingError) -> [ScopeFSEvent] {
        try events(kind: "denial", app: app).filter { operation == nil || $0.operation == operation }
    }

    /// Waits until the event log holds what the app did so far: the
    /// daemon writes its events (denials, starts, a process's leaks at its
    /// exit) in batches every 100 ms, so a count read at once can miss the
    /// last. Call it after the app ended and before counting events (as
    /// `scopefs test` does before its checks).
    public func settle() {
        Subprocess.sleep(Self.settleTime)
    }

    /// The app's leak events (SPEC S11: a process ended with scopes still
    /// counted), after `settle()`: call it once the app ended.
    /// `#expect(try mount.leaks().isEmpty)` is `scopefs test`'s `no_leaked_scope`.
    public func leaks(app: String? = nil) throws(ScopeFSTestingError) -> [ScopeFSEvent] {
        settle()
        return try events(kind: "leak", app: app)
    }

    /// How long `settle()` waits: a few of the daemon's event batches (100 ms).
    static let settleTime = Duration.milliseconds(400)

    /// Waits until the app's events of `kind` (and `operation`, if given)
    /// add up to `count` occurrences, at most `timeout`; returns them.
    ///
    /// - Throws: `.timedOut` naming what was missing and what was seen.
    @discardableResult
    public func waitForEvents(
        kind: String, operation: String? = nil, count: Int = 1, app: String? = nil, timeout: Duration = .seconds(5)
    ) throws(ScopeFSTestingError) -> [ScopeFSEvent] {
        let deadline = ContinuousClock.now + timeout
        while true {
            let found = try events(kind: kind, app: app).filter { operation == nil || $0.operation == operation }
            if found.reduce(0, { $0 + $1.occurrences }) >= count { return found }
            if ContinuousClock.now >= deadline {
                let what = operation.map { "\(kind) of \($0)" } ?? kind
                throw .timedOut("\(count) \(what) event(s) of \(app ?? self.app) within \(timeout); saw \(found)")
            }
            Subprocess.sleep(.milliseconds(50))
        }
    }

    private func makeParent(of path: String) throws(ScopeFSTestingError) {
        let parent = (path as NSString).deletingLastPathComponent
        do {
            try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true)
        } catch {
            throw .hostFileFailed("cannot create \(parent): \(error.localizedDescription)")
        }
    }
}

/// What an injected fault does to a matching request (`scopefs fault add`).
public enum Fault: Sendable, Equatable {
    /// Fail with this errno, by name: `EIO`, `ENOSPC`, `EDQUOT`, `EROFS`,
    /// `EPERM`, `ETIMEDOUT`, `EACCES`, ...
    case errno(String)
    /// Answer this many milliseconds late.
    case latency(milliseconds: Int)
}

/// An event of the daemon's log as `scopefs events --json` prints it
/// (docs/CLI.md "JSON output"); repeats are one event with `occurrences`.
public struct ScopeFSEvent: Decodable, Sendable, Equatable, CustomStringConvertible {
    public let id: Int?
    /// `denial`, `start`, `stop`, `unbalanced-stop`, `leak`, `fault`, ...
    public let kind: String
    public let app: String?
    public let pid: Int32?
    /// The path in the mount (`/APP/Providers/local/docs/report.txt`).
    public let path: String?
    /// The request's operation (`open`, `read`, ...), for denials and faults.
    public let operation: String?
    public let errno: Int32?
    /// `EPERM`, `EIO`, ...
    public let errnoName: String?
    public let grant: Int?
    public let count: Int?
    /// How many times it happened (repeats within seconds are one event).
    public let occurrences: Int

    public var description: String {
        [kind, operation, errnoName, path, occurrences > 1 ? "×\(occurrences)" : nil].compactMap { $0 }
            .joined(separator: " ")
    }
}
