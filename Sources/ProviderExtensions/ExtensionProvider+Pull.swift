import Foundation
import Glibc

/// Remote to local: the extension's items and changes become the replica's
/// placeholders, folders and symlinks (SPEC S42). Run on the sync thread.
extension ExtensionProvider {
    static let anchorKey = "anchor"
    /// Items whose remote change could not be applied locally: asked for
    /// again at each pull until they are (issue 47: never dropped because
    /// the anchor moved on). One id a line.
    static let retryKey = "unapplied"
    /// What failed, as `noteFailure` names it: a later success of the same
    /// kind clears the provider's last error.
    static let pullFailed = "changes"
    static let pushFailed = "upload"

    /// A pull; on failure, another one later.
    func pullOrRetry() {
        do {
            try pull()
            confirmVanished()
            lock.withLock {
                sync.offline = nil
                sync.lastPull = Date().timeIntervalSince1970
                // The store answers again: an error of an earlier pull is
                // history (the event keeps it), not the provider's state.
                if sync.lastError?.hasPrefix(Self.pullFailed) ?? false { sync.lastError = nil }
            }
        } catch {
            noteFailure(error, Self.pullFailed)
            wake(pull: false, push: false)
            retryLater(pull: true)
        }
    }

    /// Brings the replica to the extension's present: its changes since
    /// the stored anchor, or a full listing when there is no anchor or it
    /// expired, or the extension keeps no history.
    public func pull() throws(ExtensionFailure) {
        let control = RequestControl()
        guard case .running(let info) = calls.state else {
            throw ExtensionFailure(.unreachable, "the extension is not running")
        }
        guard info.capabilities.changes != .none, let anchor = try? store.value(Self.anchorKey) else {
            return try relist(info)
        }
        var current = anchor
        while true {
            let changes: ItemChanges
            do {
                changes = try calls.changes(since: current, control)
            } catch  where error.code == .anchorExpired {
                return try relist(info)
            }
            remember(unapplied: apply(updated: distinctItems(changes.updated, "changes"), deleted: changes.deleted))
            current = changes.anchor
            try? store.setValue(current, for: Self.anchorKey)
            if !changes.more { break }
        }
        try applyAgain(control)
    }

    /// The ids of changes that failed to apply, kept with the anchor.
    private var unapplied: Set<String> {
        Set(((try? store.value(Self.retryKey)) ?? nil)?.split(separator: "\n").map(String.init) ?? [])
    }

    private func remember(unapplied failed: [String]) {
        guard !failed.isEmpty else { return }
        try? store.setValue(unapplied.union(failed).sorted().joined(separator: "\n"), for: Self.retryKey)
    }

    /// Asks the extension again for each item whose change failed to apply,
    /// and applies it; what still fails stays on the list (with its event).
    private func applyAgain(_ control: RequestControl) throws(ExtensionFailure) {
        let waiting = unapplied
        guard !waiting.isEmpty else { return }
        var still: [String] = []
        for id in waiting.sorted() {
            do {
                let item = try calls.item(id, control)
                if !apply(updated: [item], deleted: []).isEmpty { still.append(id) }
            } catch  where error.code == .noSuchItem {
                removeRemotely(deleted: id)
            }
        }
        try? store.setValue(still.isEmpty ? nil : still.joined(separator: "\n"), for: Self.retryKey)
    }

    /// Lists everything (after taking an anchor, so that changes made while
    /// listing come with the next `changes`) and compares with the records.
    func relist(_ info: ExtensionInfo) throws(ExtensionFailure) {
        let control = RequestControl()
        let anchor = info.capabilities.changes == .none ? nil : try calls.currentAnchor(control)
        var items: [ExtensionItem] = []
        var folders = [ExtensionItem.rootID]
        var seen: [String: ExtensionItem] = [:]
        while let folder = folders.popLast() {
            var page: String?
            repeat {
                let answer = try calls.list(folder, page: page, control)
                for item in answer.items where item.parent == folder && item.id != ExtensionItem.rootID {
                    if let first = seen[item.id] {
                        if !item.isSameByBytes(as: first) { reportDuplicate(item, of: first, "list") }
                        continue
                    }
                    seen[item.id] = item
                    items.append(item)
                    if item.kind == .folder { folders.append(item.id) }
                }
                page = answer.nextPage
            } while page != nil
        }
        let gone = lock.withLock {
            index.all.map(\.item.id).filter { $0 != ExtensionItem.rootID && seen[$0] == nil }
        }
        // A full listing brings every item: what fails now is all that waits.
        let failed = apply(updated: items, deleted: gone)
        try? store.setValue(failed.isEmpty ? nil : failed.sorted().joined(separator: "\n"), for: Self.retryKey)
        try? store.setValue(anchor, for: Self.anchorKey)
    }

    /// Applies one batch: parents before children (an item whose parent is
    /// not known by the end of the batch is not shown), then removals.
    /// Returns the ids whose change could not be applied here.
    @discardableResult
    func apply(updated: [ExtensionItem], deleted: [String]) -> [String] {
        let new = placing(updated)
        defer { placed(new) }
        var failed: [String] = []
        var pending = updated.filter { $0.id != ExtensionItem.rootID }
        var progress = true
        while !pending.isEmpty && progress {
            progress = false
            var later: [ExtensionItem] = []
            for item in pending {
                let parentKnown = item.parent.map { parent in lock.withLock { index[parent] != nil } } ?? false
                if parentKnown {
                    if !update(item) { failed.append(item.id) }
                    progress = true
                } else {
                    later.append(item)
                }
            }
            pending = later
        }
        for id in deleted where id != ExtensionItem.rootID { removeRemotely(deleted: id) }
        return failed
    }

    /// One item as the extension describes it now; false when the change
    /// could not be made here (reported; `applyAgain` retries it).
    private func update(_ item: ExtensionItem) -> Bool {
        let (existing, newPath, oldPath) = lock.withLock {
            (index[item.id], index.path(parent: item.parent!, name: item.name), index.path(of: item.id))
        }
        guard let newPath else { return true }
        do {
            guard let record = existing else {
                if adoptOwnPlaceholder(item, at: newPath) { return true }
                if item.kind == .file, adoptLocalTwin(item, at: newPath) { return true }
                try makeLocal(item, at: newPath)
                return true
            }
            // Its file was removed here (the removal not sent yet): what is
            // at its path now is another file, which the change must not touch.
            if record.inode == ReplicaIndex.noFile { return true }
            // An app moved it and the move has not gone up: the local move
            // stands (the next push sends it, on the versions taken in
            // here), and the change applies where the file is. Renamed back
            // from a path it is not at, the change failed at every pull, the
            // versions never came in, and the move met a conflict at every
            // push, for good (issue 47, the model's drain).
            guard let here = located(record) else { return true }
            var path = here
            if let oldPath, oldPath != newPath, here == oldPath {
                try makeRoom(at: newPath)
                try writer.rename(oldPath, to: newPath)
                path = newPath
            }
            if record.isFile && record.item.version.content != item.version.content {
                return try replaceContent(with: item, at: path)
            }
            if record.item.mtime != item.mtime || record.item.mode != item.mode, item.kind != .symlink {
                try writer.setAttributes(path, mtime: item.mtime, mode: item.mode)
            }
            // The record as it is now: an app's first write may have marked
            // it dirty since it was read (a lost dirty mark is a lost write).
            let updated: ReplicaRecord? = lock.withLock {
                guard var current = index[item.id] else { return nil }
                current.item = item
                index.put(current)
                return current
            }
            if let updated { save([updated]) }
            return true
        } catch {
            report(.error, newPath, "cannot apply a remote change to \(newPath): \(error)")
            return false
        }
    }

    /// The item's content changed remotely. A file with local changes keeps
    /// them (its base stays the old version; the upload's conflict keeps
    /// both); any other becomes a placeholder of the new version: a new
    /// edition first (a descriptor opened on the old one reads nothing of
    /// the new, issue 47), then the record, then the file (a daemon
    /// killed between the two finds a record its file disagrees with, and
    /// repairs it at its start), with no download or app write meanwhile.
    private func replaceContent(with item: ExtensionItem, at path: String) throws -> Bool {
        enum Step {
            case keptLocal(ReplicaRecord)
            case replacing(old: ReplicaRecord, new: ReplicaRecord)
        }
        let step: Step? = lock.withLock {
            guard var current = index[item.id] else { return nil }
            // Applied already: an app's open that caught up (`catchUp`) and
            // the sync thread's pull can apply the same version side by
            // side. A second replacement would bump the edition again (a
            // spurious ESTALE) and punch out bytes a download of that very
            // version has just written.
            if current.item.version.content == item.version.content { return nil }
            if current.dirty != 0 {
                var kept = item
                kept.version.content = current.item.version.content
                kept.size = current.item.size
                current.item = kept
                index.put(current)
                return .keptLocal(current)
            }
            beginReplacingLocked(item.id)
            editions[current.inode, default: 0] += 1
            var replaced = current
            replaced.item = item
            replaced.cachedVersion = item.size == 0 ? item.version.content : nil
            replaced.present = ByteRanges()
            index.put(replaced)
            return .replacing(old: current, new: replaced)
        }
        switch step {
        case nil: return true
        case .keptLocal(let record):
            save([record])
            return true
        case .replacing(let old, let new):
            defer { endReplacing(item.id) }
            save([new])
            do {
                try writer.reset(path, inode: old.inode, size: item.size, mtime: item.mtime, mode: item.mode)
            } catch {
                // Not applied: the record says what the file still holds,
                // and the change is asked for again (`applyAgain`).
                lock.withLock { index.put(old) }
                save([old])
                throw error
            }
            return true
        }
    }

    /// A new item: a placeholder, folder or symlink.
    private func makeLocal(_ item: ExtensionItem, at path: String) throws {
        try makeRoom(at: path)
        let inode: UInt64
        switch item.kind {
        case .folder: inode = try writer.makeFolder(path, mode: item.mode, mtime: item.mtime)
        case .symlink: inode = try writer.makeSymlink(path, target: item.target ?? "")
        case .file: inode = try writer.placeholder(path, size: item.size, mtime: item.mtime, mode: item.mode)
        }
        var record = ReplicaRecord(item: item, inode: inode)
        if item.kind != .file || item.size == 0 { record.cachedVersion = item.version.content }
        lock.withLock { index.put(record) }
        save([record])
    }

    /// A new remote file whose name a local file not yet uploaded holds,
    /// with the same content: our own create, whose answer was lost (the
    /// store took it). That file is the item; no conflict copy (issue 47).
    private func adoptLocalTwin(_ item: ExtensionItem, at path: String) -> Bool {
        guard let info = folder.status(path), info.st_mode & S_IFMT == S_IFREG, Int64(info.st_size) == item.size
        else { return false }
        let inode = UInt64(info.st_ino)
        let unknownGeneration = lock.withLock {
            index.id(ofInode: inode) == nil ? writeActivity.generation(inode) : nil
        }
        guard let generation = unknownGeneration,
            let local = try? snapshot(path, inode: inode)
        else { return false }
        defer { unlink(local) }
        guard let remote = try? calls.fetch(item.id, version: item.version.content, range: nil, RequestControl())
        else { return false }
        defer { unlink(remote.path) }
        guard Self.sameContent(remote.path, local) else { return false }
        adoptCreated(item, inode: inode, writes: generation)
        return true
    }

    /// The remote's item goes to `path`: what an app put there gets a
    /// conflict name beside it. That is a file the store does not know
    /// yet, or one it knows by another name, moved here by an app with
    /// the move not sent: the store refuses that move (`exists`) for as
    /// long as its own item holds the name, and the replica cannot take
    /// that item in, so neither went through, for good (issue 47, the
    /// model's seeds 7, 12 and 41). The move goes up under the new name.
    func makeRoom(at path: String) throws {
        guard let info = folder.status(path) else { return }
        let (id, atItsOwnName) = lock.withLock {
            let id = index.id(ofInode: UInt64(info.st_ino))
            return (id, id.map { index.path(of: $0) == path } ?? false)
        }
        if atItsOwnName { return }
        let conflictPath = freeConflictPath(beside: path, for: (path as NSString).lastPathComponent)
        try writer.rename(path, to: conflictPath)
        report(.conflict, conflictPath, "\(path) was \(id == nil ? "made" : "moved") here and remotely")
        // Its upload refused for the name (`exists`) waits for no write:
        // the name is free of that now.
        guard let id else { return }
        let cleared: ReplicaRecord? = lock.withLock {
            guard var record = index[id], record.problem != nil else { return nil }
            record.problem = nil
            index.put(record)
            return record
        }
        if let cleared { save([cleared]) }
        wake(push: true, after: tunables.pushDelay)
    }

    /// The remote deleted `id`: the replica drops it with what is below,
    /// except local edits not uploaded, which stay and are uploaded again
    /// ("a queued upload of an item deleted elsewhere creates it again").
    func removeRemotely(deleted id: String) {
        let (ids, record, anyDirty) = lock.withLock {
            let ids = index.subtree(id)
            return (ids, index[id], ids.contains { index[$0]?.dirty ?? 0 != 0 })
        }
        guard let record, !ids.isEmpty, lock.withLock({ index.path(of: id) }) != nil else { return }
        // Only the item's own file, wherever an app moved it (the move not
        // sent yet): left where it is, it was an unknown file, and the
        // next push created it anew with a placeholder's holes for its
        // bytes (issue 47: uploads of bytes no app wrote). An app may also
        // have removed it and made another under its name since.
        let here = record.inode == ReplicaIndex.noFile ? nil : located(record)
        let same = here != nil
        if !anyDirty, let here { try? writer.remove(here) }
        lock.withLock {
            for id in ids {
                if !anyDirty, let record = index[id] { endEditionLocked(of: record, fileRemovedHere: same) }
                index.remove(id)
            }
        }
        save([], removing: ids)
    }

    /// The record of a file goes away: a descriptor still open on it reads
    /// ESTALE, not the holes of a placeholder no fetch fills any more (S49),
    /// when the replica removed the file itself, or when bytes of it were
    /// never fetched (an app removed it first: the model's seeds 50, 67).
    /// Under the lock; for a record without local changes.
    func endEditionLocked(of record: ReplicaRecord, fileRemovedHere: Bool) {
        guard record.isFile, record.dirty == 0, fileRemovedHere || !record.isMaterialized else { return }
        editions[record.inode, default: 0] += 1
    }

    /// A conflict name beside `path` that nothing in the replica holds yet.
    func freeConflictPath(beside path: String, for name: String) -> String {
        let parent = (path as NSString).deletingLastPathComponent
        let now = tunables.conflictClock()
        var attempt = 1
        while true {
            let candidate = ConflictName.make(for: name, at: now, attempt: attempt)
            let full = parent.isEmpty ? candidate : parent + "/" + candidate
            if folder.status(full) == nil || attempt >= 1000 { return full }
            attempt += 1
        }
    }

    /// The next pull or push after the back-off of `sync.failures`.
    func retryLater(pull: Bool = false, push: Bool = false) {
        let delay = lock.withLock {
            sync.failures += 1
            return min(tunables.retryCap, tunables.retryBase * pow(2, Double(min(sync.failures - 1, 20))))
        }
        DispatchQueue.global().asyncAfter(deadline: .now() + delay) { [weak self] in
            self?.wake(pull: pull, push: push)
        }
    }

    func noteFailure(_ error: any Error, _ what: String) {
        let message = "\(what) failed: \(error)"
        let offline = (error as? ExtensionFailure).map { [.unreachable, .notAuthenticated, .busy].contains($0.code) }
        lock.withLock {
            sync.lastError = message
            if offline ?? false { sync.offline = message }
        }
        report(.error, nil, message, errno: (error as? ExtensionFailure)?.errno)
    }
}

/// `NAME (conflict YYYY-MM-DD HHMMSS).EXT`, next to the item (docs/PROVIDERS.md).
/// A second conflict of one name within the same second gets ` 2`
/// after the time, and so on (issue 47: the copy failed with EEXIST and
/// the local edit had nowhere to go).
enum ConflictName {
    static func make(for name: String, at date: Date, attempt: Int = 1) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd HHmmss"
        let stamp = "conflict \(formatter.string(from: date))" + (attempt > 1 ? " \(attempt)" : "")
        let dot = name.lastIndex(of: ".").flatMap { $0 == name.startIndex ? nil : $0 }
        guard let dot else { return "\(name) (\(stamp))" }
        return "\(name[..<dot]) (\(stamp))\(name[dot...])"
    }
}
