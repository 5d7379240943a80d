import Foundation
import Glibc

/// A daemon killed in the middle of a replacement, a download or an
/// eviction leaves a file its record disagrees with (issue 47, finding 7:
/// the record said 22 bytes, the file held 50 MB of two versions, across
/// remounts, until an evict). The record is written before the file
/// changes, so what it says is never more than what is on disk; at the
/// next start each file is checked against it and made to agree (SPEC
/// S42, S43).
extension ExtensionProvider {
    /// Checks every file without local changes against its record: one
    /// whose size or modification time is not the item's (the replica puts
    /// both back after each of its own writes), or that has no blocks
    /// while the record says bytes are on disk, becomes a placeholder of
    /// the recorded version again; its bytes are fetched when read. A file
    /// with local changes is the app's: it goes up as any dirty file, with
    /// its base version (a conflict keeps both). Returns the repaired paths.
    @discardableResult
    func repairAfterCrash() -> [String] {
        let records = lock.withLock { index.all.filter { $0.isFile && $0.dirty == 0 && $0.problem == nil } }
        var repaired: [String] = []
        for record in records {
            guard let path = lock.withLock({ index.path(of: record.item.id) }), let info = folder.status(path),
                UInt64(info.st_ino) == record.inode, Self.disagrees(info, with: record)
            else { continue }
            do {
                try writer.reset(
                    path, inode: record.inode, size: record.item.size, mtime: record.item.mtime, mode: record.item.mode)
            } catch {
                report(.error, path, "cannot repair \(path) after a crash: \(error)")
                continue
            }
            var fixed = record
            fixed.present = ByteRanges()
            fixed.cachedVersion = record.item.size == 0 ? record.item.version.content : nil
            lock.withLock { index.put(fixed) }
            save([fixed])
            repaired.append(path)
            report(.state, path, "\(path) did not match its record after a crash: it is a placeholder again")
        }
        return repaired
    }

    /// Takes the file at `path`, which no record names, as the placeholder
    /// of `item` if it is what one is made as: a regular file with the
    /// item's size and modification time and no blocks. The daemon was
    /// killed between making the placeholder and saving its record (the
    /// replica model's seeds 59, 60, 66, 77). Taken for an app's new file,
    /// its holes went up as bytes, or to a conflict copy of zeros. An app's
    /// own sparse file does not carry the remote item's time.
    ///
    /// `reusedInode`: the pull that made it is known to have been killed
    /// (`adoptLeftByKilledPull`). A record that names the inode and whose
    /// own path does not hold it is then taken for a file removed here,
    /// its removal not sent, whose inode number the file system gave the
    /// placeholder (the replica model's seed 233); it could otherwise be
    /// that record's file moved to this very name by an app, which would
    /// need to carry the new item's size and time as well. Elsewhere the
    /// claim stands.
    func adoptOwnPlaceholder(_ item: ExtensionItem, at path: String, reusedInode: Bool = false) -> Bool {
        guard item.kind == .file, let info = folder.status(path), info.st_mode & S_IFMT == S_IFREG,
            info.st_blocks == 0
        else { return false }
        var record = ReplicaRecord(item: item, inode: UInt64(info.st_ino))
        guard !Self.disagrees(info, with: record) else { return false }
        if item.size == 0 { record.cachedVersion = item.version.content }
        let claimer = lock.withLock { index.id(ofInode: record.inode).map { ($0, index.path(of: $0)) } }
        if let (_, claimed) = claimer {
            guard reusedInode, claimed != path,
                claimed.flatMap({ folder.status($0) }).map({ UInt64($0.st_ino) != record.inode }) ?? true
            else { return false }
        }
        let adopted: Bool = lock.withLock {
            guard index.id(ofInode: record.inode) == claimer?.0, index[item.id] == nil else { return false }
            // (`put` ends a stale claim on the inode.)
            index.put(record)
            return true
        }
        guard adopted else { return false }
        save([record])
        report(.state, path, "\(path) was made as a placeholder just before a crash: it is taken as that")
        return true
    }

    /// Whether the file on disk cannot be what `record` says it holds.
    static func disagrees(_ info: stat, with record: ReplicaRecord) -> Bool {
        let mtime = Double(info.st_mtim.tv_sec) + Double(info.st_mtim.tv_nsec) / 1e9
        if Int64(info.st_size) != record.item.size || abs(mtime - record.item.mtime) > 1e-5 { return true }
        return info.st_blocks == 0 && record.cachedVersion == record.item.version.content
            && record.present.byteCount > 0
    }
}
