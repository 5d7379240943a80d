import CommandErrors
import GRDB
import Policy

extension PolicyRepository {
    /// The item recorded at `path` is now the file there: an atomic save
    /// renamed a new file over it (SPEC S48). Its identifier, and with it
    /// its grants, references and bookmarks, follow the new file instead
    /// of the item locator marking it missing and the path naming a new
    /// item. Nothing is recorded when no item is at `path`, the path
    /// holds no file, or the new file is an item of its own (a recorded
    /// file moved over another keeps its identity: the locator follows it).
    /// Returns whether the record changed (the policy version moves with
    /// it, so the daemon serves it).
    @discardableResult
    public func adoptFile(provider providerID: ProviderID, path: String) throws(CommandError) -> Bool {
        try database.write { db in
            guard let provider = try Self.fetchProviders(db).first(where: { $0.id == providerID }),
                let file = try? ProviderFile.inspect(provider: provider, path: path)
            else { return false }
            let recordedElsewhere = try Bool.fetchOne(
                db,
                sql: """
                    SELECT EXISTS (SELECT 1 FROM items WHERE provider_id = ? AND device = ? AND inode = ?
                        AND relative_path != ? AND NOT missing)
                    """,
                arguments: [providerID, file.key.device, file.key.inode, path])
            if recordedElsewhere == true { return false }
            try db.execute(
                sql: """
                    UPDATE items SET device = ?, inode = ?, birth_seconds = ?, birth_nanoseconds = ?, missing = 0
                    WHERE provider_id = ? AND relative_path = ?
                        AND (device != ? OR inode != ? OR birth_seconds != ? OR birth_nanoseconds != ? OR missing)
                    """,
                arguments: [
                    file.key.device, file.key.inode, file.key.birthSeconds, file.key.birthNanoseconds, providerID,
                    path, file.key.device, file.key.inode, file.key.birthSeconds, file.key.birthNanoseconds,
                ])
            return db.changesCount > 0
        }
    }
}
