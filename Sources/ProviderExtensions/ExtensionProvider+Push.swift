import Foundation
import Glibc
import Synchronization

/// Local to remote: what apps changed in the replica through the mount
/// goes to the extension with the base version it was made on (SPEC S43).
/// The replica's tree, compared with the records, says what was made,
/// moved or removed; the dirty marks (set before a file's first change
/// since its last upload, so a daemon killed before the close still knows)
/// say whose content changed, and `WriteActivity` whether an upload
/// carried every write. Nothing is queued in memory only: a pass after a
/// restart finds the same.
extension ExtensionProvider {
    /// What the mount tells before each change of `inode`'s content (a
    /// write, truncate, fallocate, copy); `didWrite` follows once it is on
    /// disk. Only the first change since an upload writes the record.
    /// `edition`: the one the writing descriptor was opened at (nil: a
    /// change by path). A remote edit applied since replaced the file the
    /// descriptor wrote: false, nothing begun, and the app gets ESTALE
    /// (S49), rather than its bytes in the new version's placeholder.
    @discardableResult
    public func willWrite(inode: UInt64, edition: UInt64? = nil) -> Bool {
        let (allowed, record): (Bool, ReplicaRecord?) = lock.withLock {
            waitForReplacementLocked(ofInode: inode)
            if let edition, editions[inode] ?? 0 != edition { return (false, nil) }
            writeActivity.begin(inode, now: MonotonicClock.now)
            guard let id = index.id(ofInode: inode), var record = index[id], record.isFile else { return (true, nil) }
            guard record.dirty == 0 || record.problem != nil else { return (true, nil) }
            record.dirty += 1
            record.problem = nil
            if record.cachedVersion != record.item.version.content {
                record.cachedVersion = record.item.version.content
            }
            index.put(record)
            return (true, record)
        }
        if let record { save([record]) }
        return allowed
    }

    /// The change `willWrite` announced is on disk (or failed).
    public func didWrite(inode: UInt64) {
        lock.withLock { writeActivity.end(inode, now: MonotonicClock.now) }
    }

    /// The app fsynced or closed `inode` after writing: upload without
    /// waiting for the file to be quiet.
    public func settled(inode: UInt64) {
        lock.withLock { writeActivity.settle(inode) }
        wake(push: true, after: tunables.pushDelay)
    }

    /// Where an upload of `inode` may take its snapshot now (the
    /// generation to check afterwards), or nil after asking the sync
    /// thread to come back when it may.
    func snapshotPoint(_ inode: UInt64) -> UInt64? {
        let point = lock.withLock {
            writeActivity.snapshotPoint(inode, quiet: tunables.writeQuiet, now: MonotonicClock.now)
        }
        switch point {
        case .success(let generation): return generation
        case .failure(let wait):
            wake(push: true, after: max(wait.seconds, 0.01))
            return nil
        }
    }

    /// The namespace or a file changed: push after a short delay (more
    /// changes of the same burst go in one pass).
    public func localChanged() { wake(push: true, after: tunables.pushDelay) }

    func pushOrRetry() {
        do {
            try push()
            let pullFailedOffline = lock.withLock {
                sync.failures = 0
                // A pass may make no call at all: only a pull's success
                // says the store answers again after a pull failed.
                if sync.offline?.hasPrefix(Self.pushFailed) ?? false { sync.offline = nil }
                sync.lastPush = Date().timeIntervalSince1970
                if sync.lastError?.hasPrefix(Self.pushFailed) ?? false { sync.lastError = nil }
                return sync.offline?.hasPrefix(Self.pullFailed) ?? false
            }
            // The store may answer again: ask it now rather than at the
            // end of the pull's backoff, so `offline` is not stale for
            // up to a retry cap after the store came back (issue 47).
            if pullFailedOffline { wake(pull: true) }
        } catch {
            noteFailure(error, Self.pushFailed)
            retryLater(push: true)
        }
    }

    /// One pass: removals (deepest first), moves, new items (parents
    /// first), then content. A failure that concerns the store (offline,
    /// signed out) stops the pass; one that concerns an item marks it.
    public func push() throws(ExtensionFailure) {
        guard case .running(let info) = calls.state else {
            throw ExtensionFailure(.unreachable, "the extension is not running")
        }
        let capabilities = info.capabilities
        let walked = MonotonicClock.now
        let tree = LocalTree.walk(folder.root)
        forgetGone(tree, walkedAt: walked)
        try pushRemovals(tree, capabilities)
        try pushMoves(tree, capabilities)
        try pushCreations(tree, capabilities)
        try pushContent(capabilities)
    }

    /// What is kept per inode for files no longer in the replica (not in
    /// the walk, no record): their write activity and their edition.
    private func forgetGone(_ tree: LocalTree, walkedAt walked: UInt64) {
        lock.withLock {
            let live = { (inode: UInt64) in tree.entries[inode] != nil || self.index.id(ofInode: inode) != nil }
            writeActivity.forgetGone(live: live, before: walked)
            // A file removed while an app holds it open keeps its edition:
            // forgotten, it would read 0 again, and a descriptor opened at
            // 0 would read the holes of what the remote replaced (issue 47).
            editions = editions.filter { live($0.key) || opens[$0.key] != nil }
        }
    }

    private func pushRemovals(_ tree: LocalTree, _ capabilities: ExtensionCapabilities) throws(ExtensionFailure) {
        let gone: [ReplicaRecord] = lock.withLock {
            index.all.filter { $0.item.id != ExtensionItem.rootID && tree.entries[$0.inode] == nil }
        }
        guard !gone.isEmpty else { return }
        // Deepest first: a folder's children go before it.
        let ordered = gone.sorted { depth($0.item.id) > depth($1.item.id) }
        for record in ordered {
            // Below a removed folder that is removed too: one delete each.
            guard capabilities.delete else {
                drop(record.item.id)
                continue
            }
            do {
                try calls.delete(record.item.id, baseVersion: record.item.version, RequestControl())
                drop(record.item.id)
            } catch {
                switch error.code {
                case .noSuchItem: drop(record.item.id)
                case .conflict, .notEmpty:
                    // Edited or filled elsewhere: the remote item stays, and
                    // comes back with the next pull.
                    drop(record.item.id)
                    try? store.setValue(nil, for: Self.anchorKey)
                    wake(pull: true)
                default:
                    if failsThePass(error, record) { throw error }
                }
            }
        }
    }

    /// The moves, renames and mode changes apps made that the store has
    /// not got yet, as much of each as the store can keep (under the
    /// lock). The pass sends them; `status` counts them in the queue
    /// (nil capabilities: the extension has not started since the daemon
    /// did, and every change counts).
    func unsentMoves(_ tree: LocalTree, _ capabilities: ExtensionCapabilities?) -> [(ReplicaRecord, ChangedFields)] {
        if let capabilities, !capabilities.modify { return [] }
        // What the store cannot keep stays local (as chmod on a file
        // system without modes), and is not asked for at every pass.
        let settable = capabilities?.settableFields ?? ["name", "parent", "mode"]
        let renames = capabilities?.rename ?? true
        return index.all.compactMap { record in
            guard record.item.id != ExtensionItem.rootID, let entry = tree.entries[record.inode],
                let parent = index.id(ofInode: entry.parentInode)
            else { return nil }
            var fields = ChangedFields()
            if entry.name != record.item.name && renames && settable.contains("name") { fields.name = entry.name }
            if parent != record.item.parent && renames && settable.contains("parent") { fields.parent = parent }
            if entry.kind != .symlink && entry.mode != record.item.mode && record.dirty == 0
                && settable.contains("mode")
            {
                fields.mode = entry.mode
            }
            return fields.isEmpty ? nil : (record, fields)
        }
    }

    private func pushMoves(_ tree: LocalTree, _ capabilities: ExtensionCapabilities) throws(ExtensionFailure) {
        let moved = lock.withLock { unsentMoves(tree, capabilities) }
        // A move the store refuses for its name (`exists`) goes again once
        // another move of the pass has freed that name: an app's move into
        // a name the remote's item leaves by its own pending move.
        // Reported only when no move of a round got through; else nothing
        // woke the next pass, and the app's move waited for an unrelated
        // change (issue 47, the model's seed 71).
        var waiting = moved.sorted(by: { depth($0.0.item.id) < depth($1.0.item.id) })
        while !waiting.isEmpty {
            var refused: [(ReplicaRecord, ChangedFields, ExtensionFailure)] = []
            for (record, fields) in waiting {
                if let error = try move(record, fields, tree, capabilities) { refused.append((record, fields, error)) }
            }
            if refused.count == waiting.count {
                for (record, _, error) in refused where failsThePass(error, record) { throw error }
                return
            }
            waiting = refused.map { ($0.0, $0.1) }
        }
    }

    /// One move; the store's refusal for the name is returned, to go again.
    private func move(
        _ record: ReplicaRecord, _ fields: ChangedFields, _ tree: LocalTree, _ capabilities: ExtensionCapabilities
    ) throws(ExtensionFailure) -> ExtensionFailure? {
        do {
            let answer = try calls.modify(
                record.item.id, baseVersion: record.item.version, fields: fields, contents: nil, RequestControl())
            adopt(answer, for: record)
        } catch {
            if error.code == .exists { return error }
            if error.code == .notSupported {
                if fields.name != nil || fields.parent != nil { moveBack(record, tree) }
                return nil
            }
            if error.code == .conflict || error.code == .noSuchItem {
                try? store.setValue(nil, for: Self.anchorKey)
                wake(pull: true)
                return nil
            }
            if failsThePass(error, record) { throw error }
        }
        return nil
    }

    /// The store cannot make this move (S3 moves no folders): the replica
    /// puts the item back where the store has it, and says why, rather than
    /// show a tree the store does not have.
    private func moveBack(_ record: ReplicaRecord, _ tree: LocalTree) {
        guard let here = tree.path(of: record.inode), let there = lock.withLock({ index.path(of: record.item.id) })
        else { return }
        do {
            try writer.rename(here, to: there)
            report(.error, there, "the store cannot move \(there) to \(here): moved back", errno: EXDEV)
        } catch {
            report(.error, here, "the store cannot move \(there) to \(here), nor could it be moved back: \(error)")
        }
    }

    /// New items, a folder before what goes in it; the items of one depth
    /// go up in parallel (the store's round trips overlap, as `rclone
    /// copy`'s transfers do).
    private func pushCreations(_ tree: LocalTree, _ capabilities: ExtensionCapabilities) throws(ExtensionFailure) {
        guard capabilities.create else { return }
        let unknown = lock.withLock { tree.inTreeOrder.filter { index.id(ofInode: $0.inode) == nil } }
        let levels = Dictionary(grouping: unknown) { tree.depth(of: $0.inode) }
        for depth in levels.keys.sorted() {
            try concurrently(levels[depth] ?? []) { entry throws(ExtensionFailure) in
                try self.create(entry, tree, capabilities)
            }
        }
    }

    private func create(_ entry: LocalTree.Entry, _ tree: LocalTree, _ capabilities: ExtensionCapabilities)
        throws(ExtensionFailure)
    {
        guard let parent = lock.withLock({ index.id(ofInode: entry.parentInode) }) else { return }
        if entry.kind == .symlink && !capabilities.symlinks { return }
        let path = tree.path(of: entry.inode) ?? entry.name
        var snapshot: String?
        var generation: UInt64?
        if entry.kind == .file {
            // A file still being written goes up once it is whole (finding 2).
            guard let point = snapshotPoint(entry.inode) else { return }
            generation = point
            do { snapshot = try self.snapshot(path, inode: entry.inode) } catch { return }
        }
        defer { if let snapshot { unlink(snapshot) } }
        do {
            let template = ItemTemplate(
                parent: parent, name: entry.name, kind: entry.kind, mtime: entry.mtime, mode: entry.mode,
                target: entry.target)
            let preview = entry.kind == .file ? stagedThumbnail(inode: entry.inode) : nil
            defer { discardStaged(preview) }
            let item = try uploading(path) { () throws(ExtensionFailure) in
                try calls.create(template, contents: snapshot, thumbnail: preview, RequestControl())
            }
            // Written while it went up: the rest follows as a modify.
            adoptCreated(item, inode: entry.inode, writes: generation ?? 0)
        } catch {
            if error.code == .exists, entry.kind == .file, let snapshot, let generation,
                let taken = try? remoteItem(named: entry.name, in: parent)
            {
                // A placeholder of that item, its record lost in a crash.
                if adoptOwnPlaceholder(taken, at: path) { return }
                // Our own earlier create, whose answer was lost: the same
                // content under the name is that item, not a conflict.
                if (try? isSameFile(taken, as: snapshot)) == true {
                    adoptCreated(taken, inode: entry.inode, writes: generation)
                    return
                }
            }
            if error.code == .exists {
                // Taken remotely meanwhile: the local one gets a conflict
                // name, if it is still there and still unknown. A pull
                // that ran meanwhile (an app's open catching up) may have
                // moved it and put the remote's item at the name, which
                // must not be renamed in its place (issue 47, seed 12).
                try? makeRoom(at: path)
                wake(pull: true, push: true)
                return
            }
            if failsThePass(error, nil, path: path) { throw error }
        }
    }

    /// The remote item named `name` in `parent`, if any.
    private func remoteItem(named name: String, in parent: String) throws(ExtensionFailure) -> ExtensionItem? {
        var page: String?
        repeat {
            let listed = try calls.list(parent, page: page, RequestControl())
            if let item = listed.items.first(where: { $0.name == name }) { return item }
            page = listed.nextPage
        } while page != nil
        return nil
    }

    /// Whether `item` is a file whose content is the snapshot's: a create
    /// sent again after its answer was lost meets its first copy
    /// (docs/PROVIDERS.md, "Uploads").
    private func isSameFile(_ item: ExtensionItem, as snapshot: String) throws(ExtensionFailure) -> Bool {
        guard item.kind == .file else { return false }
        let fetched = try calls.fetch(item.id, version: item.version.content, range: nil, RequestControl())
        defer { unlink(fetched.path) }
        return Self.sameContent(fetched.path, snapshot)
    }

    /// A created file's record: its content is present, and it stays dirty
    /// if it was written after the snapshot that went up. Not when a pull
    /// took the item in meanwhile (a fetch of the create's check can run
    /// one): it may have moved the file to a conflict name and made the
    /// item's placeholder, and a second record of the item would leave
    /// that placeholder with none (the replica model's seed 64). The file
    /// then goes up again as a new item, its bytes kept.
    func adoptCreated(_ item: ExtensionItem, inode: UInt64, writes generation: UInt64) {
        var record = ReplicaRecord(item: item, inode: inode)
        record.cachedVersion = item.version.content
        record.present = ByteRanges([0..<item.size])
        // nil: not adopted.
        let writtenSince: Bool? = lock.withLock {
            if index[item.id] != nil || index.id(ofInode: inode) != nil { return nil }
            let changed = !writeActivity.unchanged(inode, since: generation)
            if changed { record.dirty = 1 }
            index.put(record)
            return changed
        }
        guard let writtenSince else { return }
        save([record])
        if writtenSince { wake(push: true, after: tunables.pushDelay) }
    }

    /// Runs `body` for each item, at most `limit` at a time, and waits;
    /// the first failure is thrown once all have ended (no new one starts
    /// after it).
    func concurrently<T: Sendable>(
        _ items: [T], limit: Int = 8, _ body: @escaping @Sendable (T) throws(ExtensionFailure) -> Void
    ) throws(ExtensionFailure) {
        if items.count <= 1 {
            for item in items { try body(item) }
            return
        }
        let group = DispatchGroup()
        let slots = DispatchSemaphore(value: limit)
        let failure = Mutex<ExtensionFailure?>(nil)
        for item in items {
            slots.wait()
            if failure.withLock({ $0 }) != nil {
                slots.signal()
                break
            }
            group.enter()
            DispatchQueue.global().async {
                defer {
                    slots.signal()
                    group.leave()
                }
                do throws(ExtensionFailure) {
                    try body(item)
                } catch {
                    failure.withLock { if $0 == nil { $0 = error } }
                }
            }
        }
        group.wait()
        if let failure = failure.withLock({ $0 }) { throw failure }
    }

    /// Marks `path` uploading (its state, and `status`) while `body` sends it.
    func uploading<T>(_ path: String, _ body: () throws(ExtensionFailure) -> T) throws(ExtensionFailure) -> T {
        lock.withLock { _ = sync.uploadingNow.insert(path) }
        onStateChange?(path)
        defer { lock.withLock { _ = sync.uploadingNow.remove(path) } }
        return try body()
    }

    /// Files whose content changed, in parallel.
    private func pushContent(_ capabilities: ExtensionCapabilities) throws(ExtensionFailure) {
        guard capabilities.modify else { return }
        let dirty = lock.withLock { index.all.filter { $0.dirty != 0 && $0.problem == nil && $0.isFile } }
        try concurrently(dirty) { record throws(ExtensionFailure) in try self.upload(record) }
    }

    private func upload(_ record: ReplicaRecord) throws(ExtensionFailure) {
        // Where the file is now: an app may have moved it and the move not
        // gone up (refused, or the pass stopped before it); at the records'
        // path the snapshot found another file, or none, and the content
        // never went up (issue 47, the model's drain left it queued).
        guard let path = located(record) else { return }
        guard let generation = snapshotPoint(record.inode) else { return }
        let snapshot: String
        do { snapshot = try self.snapshot(path, inode: record.inode) } catch { return }
        defer { unlink(snapshot) }
        let preview = stagedThumbnail(inode: record.inode)
        defer { discardStaged(preview) }
        do {
            let answer = try uploading(path) { () throws(ExtensionFailure) in
                try calls.modify(
                    record.item.id, baseVersion: record.item.version, fields: ChangedFields(), contents: snapshot,
                    thumbnail: preview, RequestControl())
            }
            adopt(answer, for: record, uploadedGeneration: record.dirty, writes: generation)
        } catch {
            switch error.code {
            case .conflict: try resolveConflict(record, path: path, snapshot: snapshot, writes: generation)
            case .noSuchItem:
                // Deleted elsewhere: the edit is not lost, it is made again.
                _ = lock.withLock { index.remove(record.item.id) }
                save([], removing: [record.item.id])
                wake(push: true)
            default:
                if failsThePass(error, record) { throw error }
            }
        }
    }

    /// The upload met a remote change. Equal content means our own earlier
    /// upload had landed (a daemon killed before it noted the answer):
    /// nothing to keep twice. Otherwise the local edit becomes a conflict
    /// copy next to the item, and the item shows the remote version.
    private func resolveConflict(_ record: ReplicaRecord, path: String, snapshot: String, writes: UInt64)
        throws(ExtensionFailure)
    {
        let remote = try calls.item(record.item.id, RequestControl())
        let fetched = try calls.fetch(record.item.id, version: remote.version.content, range: nil, RequestControl())
        defer { unlink(fetched.path) }
        if Self.sameContent(fetched.path, snapshot) {
            adopt(remote, for: record, uploadedGeneration: record.dirty, writes: writes)
            return
        }
        // No app write lands between the copy and the reset (it would be
        // in neither), and the record says "the remote version, not on
        // disk" before the reset: a daemon killed in between repairs the
        // file at its start, and never uploads the placeholder's zeros.
        lock.withLock {
            beginReplacingLocked(record.item.id)
            while writeActivity.files[record.inode]?.inProgress ?? 0 > 0 {
                _ = lock.wait(until: Date().addingTimeInterval(0.01))
            }
        }
        defer { endReplacing(record.item.id) }
        // Where the file is now, not where the upload found it: a pull
        // meanwhile (an app's open catching up, or one inside the fetch
        // above) may have moved it to put the remote's item at its name,
        // and the copy took that item's placeholder for the app's bytes
        // and the reset shaped it as this item (the replica model's seeds
        // 268, 278). The conflict copy is named after the file as apps
        // see it (a move not yet sent leaves the record its old name).
        guard let path = located(record) else {
            throw ExtensionFailure(.internalError, "\(path) went away while its conflict was resolved")
        }
        let copyPath = freeConflictPath(beside: path, for: (path as NSString).lastPathComponent)
        do {
            _ = try writer.copy(path, to: copyPath)
        } catch {
            throw ExtensionFailure(.internalError, "cannot keep the conflict copy \(copyPath): \(error)")
        }
        let (before, updated, pulledMeanwhile): (ReplicaRecord, ReplicaRecord, Bool) = lock.withLock {
            editions[record.inode, default: 0] += 1
            let before = index[record.item.id] ?? record
            var updated = before
            let seen = updated.item.version.metadata
            let pulledMeanwhile = seen != record.item.version.metadata && seen != remote.version.metadata
            updated.item = remote
            updated.dirty = 0
            updated.problem = nil
            updated.cachedVersion = remote.size == 0 ? remote.version.content : nil
            updated.present = ByteRanges()
            index.put(updated)
            return (before, updated, pulledMeanwhile)
        }
        save([updated])
        do {
            try writer.reset(path, inode: record.inode, size: remote.size, mtime: remote.mtime, mode: remote.mode)
        } catch {
            // Not reset: the file still holds the app's edit, and stays
            // queued (the next pass makes the copy again: kept twice,
            // never lost).
            lock.withLock { index.put(before) }
            save([before])
            throw ExtensionFailure(.internalError, "cannot reset \(path) after its conflict copy: \(error)")
        }
        rememberConflict(copyPath)
        report(
            .conflict, copyPath, "\(path) changed here and remotely: the local edit is kept as \(copyPath)",
            original: path)
        // A pull ran meanwhile (an app's open catching up, or one inside
        // the fetch above) and took in a later remote change as kept
        // local: the record now says `remote`, which that change replaced,
        // and the anchor is past it. Asked again, or the replica showed
        // the older version for good (the replica model's seed 198).
        if pulledMeanwhile, let now = try? calls.item(record.item.id, RequestControl()) {
            apply(updated: [now], deleted: [])
        }
        wake(push: true)
    }

    /// The extension's answer to a change becomes the record: its id (a
    /// store that cannot keep ids across renames gives a new one), its
    /// versions; content uploaded is present.
    /// `writes`: the write generation the uploaded snapshot was taken at;
    /// a file written since stays dirty and goes up again.
    private func adopt(
        _ item: ExtensionItem, for record: ReplicaRecord, uploadedGeneration: Int64? = nil, writes: UInt64? = nil
    ) {
        var writtenSince = false
        let updated: ReplicaRecord = lock.withLock {
            var updated = index[record.item.id] ?? record
            let oldID = record.item.id
            updated.item = item
            if let generation = uploadedGeneration {
                updated.cachedVersion = item.version.content
                updated.present = ByteRanges([0..<item.size])
                writtenSince = writes.map { !writeActivity.unchanged(record.inode, since: $0) } ?? false
                if updated.dirty == generation && !writtenSince { updated.dirty = 0 }
            }
            if oldID != item.id {
                index.remove(oldID)
                for child in index.childIDs(of: oldID) {
                    if var moved = index[child] {
                        moved.item.parent = item.id
                        index.put(moved)
                    }
                }
            }
            index.put(updated)
            return updated
        }
        if record.item.id != item.id {
            let children = lock.withLock { index.childIDs(of: item.id).compactMap { index[$0] } }
            save([updated] + children, removing: [record.item.id])
        } else {
            save([updated])
        }
        if writtenSince { wake(push: true, after: tunables.pushDelay) }
    }

    /// Whether `error` stops the pass (the store is out of reach); if not,
    /// the item is marked and the pass goes on.
    private func failsThePass(_ error: ExtensionFailure, _ record: ReplicaRecord?, path: String? = nil)
        -> Bool
    {
        switch error.code {
        case .unreachable, .notAuthenticated, .busy, .internalError, .cancelled: return true
        default:
            if let record {
                // The record as it is now, not the pass's copy (an app's
                // write since may have marked it dirty again).
                lock.withLock {
                    guard var current = index[record.item.id] else { return }
                    current.problem = "error: \(error.code.name): \(error.message)"
                    index.put(current)
                }
                save()
            }
            report(
                .error, path ?? record.flatMap { r in lock.withLock { index.path(of: r.item.id) } },
                "upload failed: \(error.code.name): \(error.message)", errno: error.errno)
            return false
        }
    }

    /// The record of an item whose file an app removed.
    private func drop(_ id: String) {
        lock.withLock {
            if let record = index[id] { endEditionLocked(of: record, fileRemovedHere: false) }
            _ = index.remove(id)
        }
        save([], removing: [id])
    }

    private func depth(_ id: String) -> Int {
        lock.withLock { index.path(of: id)?.split(separator: "/").count ?? 0 }
    }

    /// A copy of the replica file in the staging folder, which the
    /// extension can read (its sandbox binds it) and the app cannot change
    /// while it is uploaded.
    func snapshot(_ path: String, inode: UInt64) throws -> String {
        let target = staging + "/upload-" + UUID().uuidString
        try folder.withFile(path, O_RDONLY, inode: inode) { source throws(ReplicaFolder.Failure) in
            var info = stat()
            fstat(source, &info)
            let copy = open(target, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
            guard copy >= 0 else { throw .system(errno, "cannot stage \(path)") }
            defer { close(copy) }
            try ReplicaFolder.copyContent(source, to: copy, length: Int64(info.st_size), path)
        }
        return target
    }

    static func sameContent(_ a: String, _ b: String) -> Bool {
        guard let first = FileHandle(forReadingAtPath: a), let second = FileHandle(forReadingAtPath: b) else {
            return false
        }
        defer {
            try? first.close()
            try? second.close()
        }
        while true {
            let x = (try? first.read(upToCount: 1 << 20)) ?? nil
            let y = (try? second.read(upToCount: 1 << 20)) ?? nil
            if x != y { return false }
            if x == nil || x!.isEmpty { return true }
        }
    }
}

/// The replica's tree as it is on disk now, by inode.
struct LocalTree: Sendable {
    struct Entry: Sendable {
        var inode: UInt64
        var parentInode: UInt64
        var name: String
        var kind: ItemKind
        var mode: UInt32
        var mtime: Double
        var target: String?
    }

    var entries: [UInt64: Entry] = [:]
    /// Parents before children.
    var inTreeOrder: [Entry] = []

    /// How many folders down from the replica's root (1 for its children).
    func depth(of inode: UInt64) -> Int {
        var depth = 0
        var current = inode
        while let entry = entries[current], depth < 300 {
            depth += 1
            current = entry.parentInode
        }
        return depth
    }

    func path(of inode: UInt64) -> String? {
        var names: [String] = []
        var current = inode
        while let entry = entries[current], names.count < 300 {
            names.append(entry.name)
            current = entry.parentInode
        }
        return names.reversed().joined(separator: "/")
    }

    static func walk(_ root: String) -> LocalTree {
        var tree = LocalTree()
        var info = stat()
        guard lstat(root, &info) == 0 else { return tree }
        var folders: [(path: String, inode: UInt64)] = [(root, UInt64(info.st_ino))]
        while !folders.isEmpty {
            let (path, inode) = folders.removeFirst()
            guard let names = try? FileManager.default.contentsOfDirectory(atPath: path) else { continue }
            for name in names.sorted() {
                var child = stat()
                let childPath = path + "/" + name
                guard lstat(childPath, &child) == 0 else { continue }
                let kind: ItemKind
                var target: String?
                switch child.st_mode & S_IFMT {
                case S_IFDIR: kind = .folder
                case S_IFREG: kind = .file
                case S_IFLNK:
                    kind = .symlink
                    target = try? FileManager.default.destinationOfSymbolicLink(atPath: childPath)
                default: continue
                }
                let entry = Entry(
                    inode: UInt64(child.st_ino), parentInode: inode, name: name, kind: kind,
                    mode: ReplicaFolder.permissions(UInt32(child.st_mode & 0o7777)),
                    mtime: Double(child.st_mtim.tv_sec) + Double(child.st_mtim.tv_nsec) / 1e9, target: target)
                tree.entries[entry.inode] = entry
                tree.inTreeOrder.append(entry)
                if kind == .folder { folders.append((childPath, entry.inode)) }
            }
        }
        return tree
    }
}
