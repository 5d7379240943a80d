import Foundation
import Glibc

/// What a pull is about to make in the replica, saved before it makes it.
/// A placeholder, folder or symlink is made first and its record saved
/// after (the record needs its inode): a daemon killed in between left a
/// file no record names, which apps could open and write until the next
/// pull took it, and read its holes as zeros (issue 47, the replica model's
/// seeds 59, 87 and 159). The items of each batch that have no record yet
/// are saved here first; at the next start, what stands at their names
/// as the replica made it becomes theirs, before any app can open it.
/// One store write per batch with new items, not per item.
extension ExtensionProvider {
    static let placingKey = "placing"

    /// Saves `items` as about to be made (those with a record are not).
    /// Returns what was saved, to give to `placed`.
    func placing(_ items: [ExtensionItem]) -> [String] {
        let new = lock.withLock { items.filter { index[$0.id] == nil } }
        guard !new.isEmpty else { return [] }
        placingJournal.withLock { journal in
            for item in new { journal[item.id] = item }
            saveJournal(journal)
        }
        return new.map(\.id)
    }

    /// The batch's records are saved (or it failed): its items are no
    /// longer about to be made. Pulls can overlap (an app's open catching
    /// up), so each takes out only its own.
    func placed(_ ids: [String]) {
        guard !ids.isEmpty else { return }
        placingJournal.withLock { journal in
            for id in ids { journal[id] = nil }
            saveJournal(journal)
        }
    }

    private func saveJournal(_ journal: [String: ExtensionItem]) {
        let encoded = journal.isEmpty ? nil : try? JSONEncoder().encode(Array(journal.values))
        let text = encoded.map { String(decoding: $0, as: UTF8.self) }
        try? store.setValue(text, for: Self.placingKey)
    }

    /// At start: each item a killed pull was making that has no record, and
    /// whose name holds what the replica makes for it (a placeholder with
    /// the item's size and time and no blocks, an empty folder, the
    /// symlink), is given its record. Anything else at the name is left:
    /// it is an app's, and the next pull puts it beside the item as usual.
    func adoptLeftByKilledPull() {
        guard let text = (try? store.value(Self.placingKey)) ?? nil,
            let items = try? JSONDecoder().decode([ExtensionItem].self, from: Data(text.utf8))
        else { return }
        for item in items {
            guard let parent = item.parent,
                let path = lock.withLock({ index[item.id] == nil ? index.path(parent: parent, name: item.name) : nil })
            else { continue }
            if item.kind == .file {
                _ = adoptOwnPlaceholder(item, at: path, reusedInode: true)
            } else if isMade(item, at: path) {
                var record = ReplicaRecord(item: item, inode: UInt64(folder.status(path)?.st_ino ?? 0))
                record.cachedVersion = item.version.content
                let adopted: Bool = lock.withLock {
                    guard index.id(ofInode: record.inode) == nil else { return false }
                    index.put(record)
                    return true
                }
                if adopted { save([record]) }
            }
        }
        try? store.setValue(nil, for: Self.placingKey)
    }

    /// Whether `path` is the folder or the symlink the replica makes for
    /// `item`. A folder's items come after it in a batch, and no app saw
    /// the folder before this start: it is the replica's as it is.
    private func isMade(_ item: ExtensionItem, at path: String) -> Bool {
        guard let info = folder.status(path) else { return false }
        switch item.kind {
        case .folder: return info.st_mode & S_IFMT == S_IFDIR
        case .symlink: return info.st_mode & S_IFMT == S_IFLNK && folder.linkTarget(path) == (item.target ?? "")
        case .file: return false
        }
    }
}
