import CommandErrors
import Foundation
import HostText
import Policy
import PolicyStore

/// `grant --from FILE` and `fleet grant --from FILE`: the items of a bulk
/// grant, one `PROVIDER:RELPATH` a line (`-`: standard input). Lines are
/// bytes, as paths are (SPEC S33a); blank lines and lines starting with
/// `#` are skipped (a provider ID has no `#`). A line without a provider
/// is refused with exit 65, naming the line, and nothing is granted.
enum GrantList {
    static func read(_ source: String) throws(CommandError) -> [GrantItem] {
        let name = source == "-" ? "standard input" : source
        let data: Data
        if source == "-" {
            data = FileHandle.standardInput.readDataToEndOfFile()
        } else {
            guard let read = FileManager.default.contents(atPath: source) else {
                let reason = FileManager.default.fileExists(atPath: source) ? "cannot be read" : "does not exist"
                throw CommandError(.noInput, "the list of items \(source) \(reason); nothing was granted")
            }
            data = read
        }
        var items: [GrantItem] = []
        for (index, bytes) in data.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).enumerated() {
            let line = String(hostBytes: bytes)
            if line.isEmpty || line.hasPrefix("#") { continue }
            let origin = "\(name) line \(index + 1)"
            guard let reference = ItemReference(argument: line) else {
                throw CommandError(
                    .badData, "\(origin): expected PROVIDER:RELPATH, not \(line); nothing was granted")
            }
            items.append(GrantItem(provider: reference.provider, path: reference.path, origin: origin))
        }
        return items
    }

    /// What a bulk grant prints: how many grants were new and how many
    /// replaced an existing grant of their item.
    static func summary(_ changes: [GrantChange], app: AppID, access: Access, fleet: Bool) -> String {
        let replaced = changes.filter { $0.previous != nil }.count
        let label = access == .read ? "read-only" : "read-write"
        return
            "\(changes.count) grants to \(app.escapedForTerminal)\(fleet ? " on every host" : "") (\(label)): \(changes.count - replaced) new, \(replaced) replaced"
    }
}
