import CommandErrors
import Foundation
import GRDB
import Policy

/// Keeps item identifiers stable (SPEC §1): when an item is no longer at
/// its recorded path — renamed or moved through the mount or directly on the
/// host, with the daemon running or not — it is found again by its file
/// identity (device and inode) and its path is updated. One lstat per item
/// when nothing moved; a walk of the provider only when something did.
public struct ItemLocator: Sendable {
    public let repository: PolicyRepository

    public init(repository: PolicyRepository) {
        self.repository = repository
    }

    struct Recorded {
        var id: ItemIdentifier
        var path: String
        var identity: FileIdentity
        var missing: Bool
    }

    static func key(_ row: Row) -> FileIdentity {
        FileIdentity(
            device: row["device"], inode: row["inode"], birthSeconds: row["birth_seconds"],
            birthNanoseconds: row["birth_nanoseconds"])
    }

    /// Re-locates every item; returns true when any location changed.
    @discardableResult
    public func refresh() throws(CommandError) -> Bool {
        var changed = false
        for provider in try repository.providers() {
            changed = try refresh(provider) || changed
        }
        return changed
    }

    private func refresh(_ provider: Provider) throws(CommandError) -> Bool {
        let items = try repository.database.read { db in
            try Row.fetchAll(
                db,
                sql:
                    "SELECT id, relative_path, device, inode, birth_seconds, birth_nanoseconds, missing FROM items WHERE provider_id = ?",
                arguments: [provider.id]
            ).map { Recorded(id: $0["id"], path: $0["relative_path"], identity: Self.key($0), missing: $0["missing"]) }
        }
        let lost = items.filter { Self.identity(at: provider.directory, $0.path) != $0.identity }
        guard !lost.isEmpty else { return false }
        var found = Self.walk(provider.directory, looking: Set(lost.map(\.identity)))
        // A walk is no proof that an item is gone: one the owner moves
        // while the walk reads folders slips past it (listed under a name
        // it has left by the time it is looked at, and not yet at the name
        // it goes to). While an item is missing its path alone decides its
        // grant's coverage (`PolicySnapshot.itemFile`), so a folder swapped
        // in a loop and wrongly marked missing let the folder swapped in
        // for it be read (issue 28). Before an item is marked missing,
        // further walks must miss it too; items already missing cost none.
        for _ in 0..<Self.confirmingWalks {
            let unconfirmed = Set(lost.filter { !$0.missing && found[$0.identity] == nil }.map(\.identity))
            guard !unconfirmed.isEmpty else { break }
            found.merge(Self.walk(provider.directory, looking: unconfirmed)) { first, _ in first }
        }
        var updates: [(Recorded, String?)] = []
        for item in lost {
            let path = found[item.identity]
            if path != item.path || item.missing != (path == nil) { updates.append((item, path)) }
        }
        guard !updates.isEmpty else { return false }
        try repository.database.write { db in
            for (item, path) in updates {
                guard let path else {
                    try db.execute(sql: "UPDATE items SET missing = 1 WHERE id = ?", arguments: [item.id])
                    continue
                }
                // Whatever was recorded at the new path is not there any more.
                try db.execute(
                    sql:
                        "UPDATE items SET relative_path = relative_path || ' (gone ' || id || ')', missing = 1 WHERE provider_id = ? AND relative_path = ? AND id != ?",
                    arguments: [provider.id, path, item.id])
                try db.execute(
                    sql: "UPDATE items SET relative_path = ?, missing = 0 WHERE id = ?", arguments: [path, item.id])
            }
        }
        return true
    }

    /// Whether item `id` has left the path recorded for it: one row and
    /// one lstat, where `refresh` reads every item and lstats each. False
    /// for an item unknown or already recorded missing: finding those
    /// again is the item-location thread's (each second), since a walk of
    /// the whole provider on an app's every request would be the app's to
    /// ask for.
    public func hasMoved(_ id: ItemIdentifier) throws(CommandError) -> Bool {
        let recorded = try repository.database.read { db in
            try Row.fetchOne(
                db,
                sql: """
                    SELECT i.relative_path, i.device, i.inode, i.birth_seconds, i.birth_nanoseconds, i.missing,
                        p.directory
                    FROM items i JOIN providers p ON p.id = i.provider_id WHERE i.id = ?
                    """,
                arguments: [id]
            ).map {
                (
                    path: $0["relative_path"] as String, identity: Self.key($0), missing: $0["missing"] as Bool,
                    directory: $0["directory"] as String
                )
            }
        }
        guard let recorded, !recorded.missing else { return false }
        return Self.identity(at: recorded.directory, recorded.path) != recorded.identity
    }

    /// Walks after the first that must also miss an item before it is
    /// marked missing: each misses a moving item only if it moves at the
    /// wrong moment again.
    static let confirmingWalks = 3

    /// Whether something exists at `path` of a provider directory (no symlink followed).
    public static func exists(at directory: String, _ path: String) -> Bool {
        identity(at: directory, path) != nil
    }

    static func identity(at directory: String, _ path: String) -> FileIdentity? {
        FileIdentity.at(directory, path)?.key
    }

    /// Walks the provider (not following symlinks) until every wanted
    /// identity is found.
    static func walk(_ root: String, looking wanted: Set<FileIdentity>) -> [FileIdentity: String] {
        var found: [FileIdentity: String] = [:]
        var queue = [""]
        while let relative = queue.popLast(), found.count < wanted.count {
            let full = relative.isEmpty ? root : root + "/" + relative
            guard let names = HostFiles.names(in: full) else { continue }
            for name in names {
                let path = RelativePath.join(relative, name)
                guard let (key, isDirectory) = FileIdentity.at(root, path) else { continue }
                if wanted.contains(key) { found[key] = path }
                if isDirectory { queue.append(path) }
            }
        }
        return found
    }
}
