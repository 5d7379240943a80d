import Foundation
import Glibc

/// Who may write a replica file's bytes when (issue 47, SPEC S42, S49):
/// a download writes the version it fetched, and only while the record
/// is still at that version; a replacement (a remote edit applied, a
/// conflict's reset, an eviction) waits for the downloads writing the
/// file, and no download or app write starts on it until it is done. So a
/// download of the old version that answers after a remote edit never
/// lands in the new version's placeholder (the replica held 50 MB of two
/// versions under a 22-byte record), and an app's write never lands in a
/// file being reset.
struct ContentWrites {
    /// Downloads copying bytes into each item's file now.
    var writing: [String: Int] = [:]
    /// Items whose file is being replaced now.
    var replacing: Set<String> = []
}

extension ExtensionProvider {
    /// A download may write `record`'s bytes: the item is still at that
    /// version and not being replaced. `endDownloadWrite` follows.
    func beginDownloadWrite(_ record: ReplicaRecord) -> Bool {
        lock.withLock {
            let id = record.item.id
            guard !contentWrites.replacing.contains(id),
                index[id]?.item.version.content == record.item.version.content
            else { return false }
            contentWrites.writing[id, default: 0] += 1
            return true
        }
    }

    /// Whether the replica still holds `record`'s version.
    func isCurrent(_ record: ReplicaRecord) -> Bool {
        lock.withLock { index[record.item.id]?.item.version.content == record.item.version.content }
    }

    func endDownloadWrite(_ id: String) {
        lock.withLock {
            contentWrites.writing[id, default: 1] -= 1
            if contentWrites.writing[id] == 0 { contentWrites.writing[id] = nil }
            lock.broadcast()
        }
    }

    /// Marks `id` as being replaced once no download writes it (under the
    /// lock); `endReplacing` (after the lock was let go) ends it.
    func beginReplacingLocked(_ id: String) {
        contentWrites.replacing.insert(id)
        while contentWrites.writing[id, default: 0] > 0 { lock.wait() }
    }

    func endReplacing(_ id: String) {
        lock.withLock {
            contentWrites.replacing.remove(id)
            lock.broadcast()
        }
    }

    /// Waits while the file of `inode` is being replaced (under the lock):
    /// an app's write comes after the reset, never under it.
    func waitForReplacementLocked(ofInode inode: UInt64) {
        while let id = index.id(ofInode: inode), contentWrites.replacing.contains(id) { lock.wait() }
    }

    /// The mount made a new file (or folder, or symlink) at `inode`: a
    /// record that names that inode is of a file removed since, whose
    /// removal has not gone up yet (the file system reuses inodes at once).
    public func created(inode: UInt64) {
        lock.withLock { index.madeNew(inode) }
        save([])
    }

    /// Where the file of `record` is now: its path by the records, or, if
    /// an app moved it there and the push has not told the store yet, the
    /// path the replica's tree has for its inode (a download of a file
    /// renamed a moment ago still finds it).
    func located(_ record: ReplicaRecord) -> String? {
        if let path = lock.withLock({ index.path(of: record.item.id) }),
            let info = folder.status(path), UInt64(info.st_ino) == record.inode
        {
            return path
        }
        let tree = LocalTree.walk(folder.root)
        return tree.entries[record.inode] == nil ? nil : tree.path(of: record.inode)
    }
}
