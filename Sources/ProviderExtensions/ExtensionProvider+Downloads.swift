import Foundation
import Glibc
import Synchronization

/// Downloads: a placeholder's bytes come from the extension when an app
/// reads them, after the gate and the scope check (the mount calls only
/// then), by range, one download per range however many readers wait
/// for it (SPEC S42). Run on the readers' FUSE workers.
extension ExtensionProvider {
    /// One fetch in flight, on a thread of its own; readers that need its
    /// bytes wait for it. When the last one stops waiting (a signal, a
    /// revoke), the fetch is cancelled.
    final class Download: @unchecked Sendable {
        let range: Range<Int64>
        let control: RequestControl
        /// Bytes the extension says it has (`$/progress`), for
        /// `user.scopefs.progress` while the download runs.
        let received = ReceivedBytes()
        var done = false
        var failure: ExtensionFailure?
        var waiters = 0
        /// Every reader left it with its bytes (a stream runs on for the
        /// next ones); counted against `maxLeftStreams` until one returns.
        var readersLeft = false
        /// The app whose read started it: a revoke of that app cancels it
        /// once nobody waits on it (read-ahead, a stream its readers left).
        var app: String?
        let started = DispatchTime.now().uptimeNanoseconds
        /// A streamed fetch (`streamsFetch`): its staged bytes go into the
        /// replica as they come, in order, on this queue; `streamedFrom`
        /// is the item offset of the staged file's first byte,
        /// `streamedThrough` the end of what is in the replica. Touched on
        /// `delivery` only (and after it drained).
        let delivery = DispatchQueue(label: "scopefs.download.delivery")
        var streamedFrom: Int64?
        var streamedThrough: Int64?

        init(range: Range<Int64>, deliver: (@Sendable (Download, StagedPrefix) -> Void)? = nil) {
            self.range = range
            let owner = DownloadReference()
            var onStaged: (@Sendable (StagedPrefix) -> Void)?
            if let deliver {
                onStaged = { prefix in
                    if let download = owner.download {
                        deliver(download, prefix)
                    } else {
                        close(prefix.descriptor)
                    }
                }
            }
            let received = received
            control = RequestControl(
                onProgress: { completed, _ in received.count.store(completed, ordering: .relaxed) },
                onStaged: onStaged)
            owner.download = self
        }
    }

    /// The download a control's `onStaged` belongs to (made before it).
    final class DownloadReference: @unchecked Sendable {
        weak var download: Download?
    }

    final class ReceivedBytes: Sendable {
        let count = Atomic<Int64>(0)
    }

    /// The errno an app gets when its policy forbids downloads (Apple's
    /// IOPOL_MATERIALIZE_DATALESS_FILES_OFF answers EDEADLK too).
    public static let neverDownloadErrno = EDEADLK
    static let neverDownloads = "never downloads (its policy)"

    /// Whether `failure` is an app's policy refusing a download.
    public static func isPolicyRefusal(_ failure: ExtensionFailure) -> Bool {
        failure.code == .denied && failure.message.hasSuffix(neverDownloads)
    }

    /// Makes `[offset, offset + length)` of the replica file `inode` present.
    /// `control` is the app's: its cancel (a signal, a revoke) ends the
    /// wait with EINTR.
    /// `interrupted` is polled while it waits: the app's thread has a
    /// signal to handle (a read through the page cache waits on a page
    /// lock, where the kernel sends no FUSE interrupt).
    /// `edition`: the one the reader's descriptor was opened at; a remote
    /// edit applied while it waited makes its read ESTALE (`conflict`), not
    /// a read of the new version's bytes after the old one's (issue 47).
    public func prepareRead(
        inode: UInt64, offset: Int64, length: Int, app: String?, control: RequestControl, edition: UInt64? = nil,
        interrupted: @escaping @Sendable () -> Bool = { false }
    ) throws(ExtensionFailure) {
        guard let (id, size) = missingContent(inode: inode) else { return }
        let end = min(size, offset + Int64(length))
        guard offset < end else { return }
        if let app, neverDownload.contains(app) {
            throw ExtensionFailure(.denied, "\(app) \(Self.neverDownloads)")
        }
        register(control, for: app)
        defer { unregister(control, for: app) }
        try materialize(id, offset, end, control, interrupted, app: app)
        if let edition, self.edition(inode: inode) != edition {
            throw ExtensionFailure(.conflict, "the item changed remotely during the read")
        }
    }

    /// Whether a read of `inode` may have to wait for a download: its item
    /// and size if its content is not all on disk, else nil. Warm reads
    /// cost this one lookup under the lock (no record is rewritten; the LRU
    /// time moves at most once a second), and the mount calls it before it
    /// sets up anything a wait would need.
    public func missingContent(inode: UInt64) -> (id: String, size: Int64)? {
        readState(inode: inode).missing
    }

    /// What a read of `inode` needs to know, in one lookup under the lock
    /// (the hot path of every read of an extension's file): the edition
    /// its descriptor must still be on, and the missing content, as
    /// `edition(inode:)` and `missingContent(inode:)` answer.
    public func readState(inode: UInt64) -> (edition: UInt64, missing: (id: String, size: Int64)?) {
        let now = Date().timeIntervalSince1970
        return lock.withLock {
            let edition = editions[inode] ?? 0
            guard let id = index.id(ofInode: inode), let record = index[id], record.isFile else {
                return (edition, nil)
            }
            if now - record.lastUsed > 1 { index.touch(id, at: now) }
            return (edition, record.isMaterialized || record.dirty != 0 ? nil : (id, record.item.size))
        }
    }

    /// Downloads every missing byte of the item (for a writer, `pin`).
    public func materializeWhole(
        inode: UInt64, app: String?, control: RequestControl, interrupted: @escaping @Sendable () -> Bool = { false }
    ) throws(ExtensionFailure) {
        guard
            let id = lock.withLock({ () -> String? in
                guard let id = index.id(ofInode: inode), let record = index[id], record.isFile,
                    !record.isMaterialized, record.dirty == 0
                else { return nil }
                return id
            })
        else { return }
        if let app, neverDownload.contains(app) {
            throw ExtensionFailure(.denied, "\(app) \(Self.neverDownloads)")
        }
        register(control, for: app)
        defer { unregister(control, for: app) }
        for attempt in 1...Self.catchUpAttempts {
            do {
                // To the end of the version present at each step: one
                // applied meanwhile (a pull inside a fetch, an app's open
                // catching up) may be larger, and its bytes past the old
                // size were holes under the writer, uploaded as zeros (the
                // replica model's seed 373).
                try materialize(id, 0, Int64.max, control, interrupted, app: app)
                return
            } catch  where error.code == .conflict && attempt < Self.catchUpAttempts {
                // The store holds a version the replica has not pulled
                // yet. Nobody has read this open's bytes: it takes the
                // item's present version, not ESTALE (S49 is about files
                // already open; the model's seed 18).
                try catchUp(id, control)
            }
        }
    }

    /// How often a writer's open or a pin takes the item's present version
    /// when the store moved on during its download, before it fails.
    static let catchUpAttempts = 3

    /// Applies the store's present description of `id` now, as the next
    /// pull would (a clean file becomes a placeholder of the new version,
    /// a new edition: descriptors open on the old one read ESTALE).
    private func catchUp(_ id: String, _ control: RequestControl) throws(ExtensionFailure) {
        let item: ExtensionItem
        do {
            item = try calls.item(id, control)
        } catch  where error.code == .noSuchItem {
            itemVanished(id)
            throw error
        }
        guard apply(updated: [item], deleted: []).isEmpty else {
            throw ExtensionFailure(.conflict, "the item changed remotely and the change cannot be applied here")
        }
    }

    private func materialize(
        _ id: String, _ offset: Int64, _ end: Int64, _ control: RequestControl,
        _ interrupted: @escaping @Sendable () -> Bool, app: String?
    ) throws(ExtensionFailure) {
        let streams = capabilities?.streamsFetch ?? false
        while true {
            if control.isCancelled { throw ExtensionFailure(.cancelled, "interrupted") }
            let running = calls.state.isRunning
            enum Step {
                case done
                case failed(ExtensionFailure)
                case wait(Download, missing: Int64)
                case fetch(Download, ReplicaRecord, prefetch: [Download], missing: Int64)
            }
            let step: Step = lock.withLock {
                guard let record = index[id], record.isFile, record.dirty == 0 else { return .done }
                // The item may have shrunk since the read began (a remote
                // edit, issue 47): past its end there is nothing to fetch.
                let end = min(end, record.item.size)
                guard offset < end else { return .done }
                let present = record.cachedVersion == record.item.version.content ? record.present : ByteRanges()
                guard let missing = present.firstMissing(from: offset, to: end) else { return .done }
                if let download = downloads[id]?.first(where: { $0.range.contains(missing) }) {
                    return .wait(download, missing: missing)
                }
                if let failure = recentFailure(id, missing, running: running) { return .failed(failure) }
                let (range, window) = fetchRange(id, record, missing, end, present, streams: streams)
                guard !range.isEmpty else { return .done }
                let download = makeDownload(range, record, streams: streams)
                download.app = app
                downloads[id, default: []].append(download)
                let ahead = streams ? [] : prefetch(id, record, after: range, window, present)
                for other in ahead { other.app = app }
                return .fetch(download, record, prefetch: ahead, missing: missing)
            }
            switch step {
            case .done: return
            case .failed(let failure): throw failure
            case .wait(let download, let missing):
                try wait(for: download, control, interrupted) { self.isPresent(id, missing) }
            case .fetch(let download, let record, let prefetch, let missing):
                DispatchQueue.global().async { self.fetch(download, record) }
                for ahead in prefetch { DispatchQueue.global().async { self.fetch(ahead, record) } }
                try wait(for: download, control, interrupted) { self.isPresent(id, missing) }
            }
        }
    }

    /// Whether byte `offset` of the current version of `id` is on disk
    /// (under the lock).
    private func isPresent(_ id: String, _ offset: Int64) -> Bool {
        guard let record = index[id], record.cachedVersion == record.item.version.content else { return false }
        return record.present.covers(offset, offset + 1)
    }

    private func makeDownload(_ range: Range<Int64>, _ record: ReplicaRecord, streams: Bool) -> Download {
        guard streams else { return Download(range: range) }
        cancelLeftStreams(keeping: tunables.maxLeftStreams - 1)
        return Download(range: range) { [weak self] download, prefix in
            guard let self else {
                close(prefix.descriptor)
                return
            }
            download.delivery.async { self.deliver(prefix, of: download, record) }
        }
    }

    /// What to fetch for a read missing `missing...`: the whole of a small
    /// file; else whole blocks from `missing`, a window that grows while
    /// the reader goes on where it stopped (readahead), never past bytes
    /// present or another download.
    /// An extension that streams its fetches (`streamsFetch`) serves a
    /// reader that goes on with one request for the rest of the file (up
    /// to `streamedWindow`): its bytes are usable as they come, so one
    /// large window costs the reader no wait, and the store one request.
    private func fetchRange(
        _ id: String, _ record: ReplicaRecord, _ missing: Int64, _ end: Int64, _ present: ByteRanges,
        streams: Bool = false
    ) -> (Range<Int64>, window: Int64) {
        let size = record.item.size
        if size <= tunables.wholeFileLimit && present.isEmpty && downloads[id, default: []].isEmpty {
            return (0..<size, size)
        }
        let previous = readAhead[id]
        let grown: (Int64) -> Int64 = { window in
            streams ? self.tunables.streamedWindow : min(self.tunables.maxWindow, window * self.tunables.windowGrowth)
        }
        let window = previous.map { $0.end == missing ? grown($0.window) : tunables.block } ?? tunables.block
        let start = missing / tunables.block * tunables.block
        var stop = min(size, max(end, start + window))
        stop = (stop + tunables.block - 1) / tunables.block * tunables.block
        stop = min(stop, size, present.missingRunEnd(from: missing, limit: size))
        for other in downloads[id, default: []] where other.range.lowerBound > missing {
            stop = min(stop, other.range.lowerBound)
        }
        // Never a trap: an empty range (nothing left to fetch) is the caller's `.done`.
        let lower = max(start, present.firstMissing(from: start, to: stop) ?? missing)
        guard lower < stop else { return (missing..<missing, window) }
        let range = lower..<stop
        readAhead[id] = (range.upperBound, window)
        return (range, window)
    }

    /// A reader that goes on where it stopped gets the next windows fetched
    /// while it reads this one (`prefetchWindows` of them, in parallel), so
    /// the store is never idle between them and a window's wait for its
    /// last byte overlaps the next ones (a ranged GET costs a round trip
    /// before its first byte, and its bytes are usable only once all came).
    /// Not the reader's: they run to their end even if the reader goes.
    private func prefetch(
        _ id: String, _ record: ReplicaRecord, after range: Range<Int64>, _ window: Int64, _ present: ByteRanges
    ) -> [Download] {
        // Only once the reader went on where it stopped: a read of a file's
        // first page (a file manager's sniffing, a thumbnailer) costs one
        // block, not the windows after it.
        guard window >= 2 * tunables.block else { return [] }
        var made: [Download] = []
        var start = range.upperBound
        var next = window
        for _ in 0..<tunables.prefetchWindows {
            let size = record.item.size
            next = min(tunables.maxWindow, next * tunables.windowGrowth)
            guard start < size, !present.covers(start, start + 1),
                !downloads[id, default: []].contains(where: { $0.range.contains(start) })
            else { break }
            var stop = min(size, start + next, present.missingRunEnd(from: start, limit: size))
            for other in downloads[id, default: []] where other.range.lowerBound > start {
                stop = min(stop, other.range.lowerBound)
            }
            guard start < stop else { break }
            let download = Download(range: start..<stop)
            downloads[id, default: []].append(download)
            readAhead[id] = (stop, next)
            made.append(download)
            start = stop
        }
        return made
    }

    /// A stream its readers left runs on (they come back for the next
    /// bytes), up to 1 GiB: an app that starts streams and moves on would
    /// hold every call the extension takes in flight, and other apps'
    /// downloads would wait. Past `keeping` left streams, the oldest are
    /// cancelled (under the lock; S40).
    private func cancelLeftStreams(keeping: Int) {
        let left = downloads.values.joined().filter { $0.readersLeft && !$0.done }.sorted { $0.started < $1.started }
        for download in left.dropLast(max(0, keeping)) { download.control.cancel() }
    }

    /// Waits for `download`, or until `satisfied` (under the lock: the
    /// bytes the reader needs came, from a streamed fetch). The caller's
    /// cancel or signal ends the wait (EINTR), and the download with it
    /// when nobody else waits; a satisfied reader leaves it running (it
    /// comes back for the next bytes).
    private func wait(
        for download: Download, _ control: RequestControl, _ interrupted: @Sendable () -> Bool,
        satisfied: () -> Bool
    ) throws(ExtensionFailure) {
        lock.lock()
        download.waiters += 1
        download.readersLeft = false
        var gaveUp = true
        defer {
            download.waiters -= 1
            if !download.done && download.waiters == 0 {
                if gaveUp { download.control.cancel() } else { download.readersLeft = true }
            }
            lock.unlock()
        }
        while !download.done {
            if satisfied() {
                gaveUp = false
                return
            }
            if control.isCancelled { throw ExtensionFailure(.cancelled, "the wait was cancelled") }
            lock.unlock()
            let signalled = interrupted()
            lock.lock()
            if signalled { throw ExtensionFailure(.cancelled, "interrupted by a signal") }
            _ = lock.wait(until: Date().addingTimeInterval(0.05))
        }
        gaveUp = false
        if let failure = download.failure, !satisfied() { throw failure }
    }

    /// Puts the bytes a streamed fetch staged so far into the replica (on
    /// the download's delivery queue, in order) and wakes its readers. A
    /// failure here only loses the head start: the answer's copy writes
    /// whatever is not in yet.
    private func deliver(_ prefix: StagedPrefix, of download: Download, _ record: ReplicaRecord) {
        defer { close(prefix.descriptor) }
        if download.streamedFrom == nil {
            download.streamedFrom = prefix.offset
            download.streamedThrough = prefix.offset
        }
        guard prefix.offset == download.streamedFrom, let through = download.streamedThrough else { return }
        let end = min(prefix.offset + prefix.length, record.item.size)
        guard end > through, let path = located(record) else { return }
        guard beginDownloadWrite(record) else { return }
        defer { endDownloadWrite(record.item.id) }
        do {
            ownWrite(record.inode)
            try folder.withFile(path, O_WRONLY, inode: record.inode) { target throws(ReplicaFolder.Failure) in
                try ReplicaFolder.copyContent(
                    prefix.descriptor, from: through - prefix.offset, to: target, at: through, length: end - through,
                    path)
                try ReplicaFolder.restoreTime(target, record.item.mtime, path)
            }
        } catch {
            return
        }
        download.streamedThrough = end
        lock.withLock {
            markPresent(through..<end, of: record)
            lock.broadcast()
        }
    }

    /// Records bytes of `record`'s version as on disk (under the lock);
    /// the record as now indexed, or nil when the item changed meanwhile.
    @discardableResult
    private func markPresent(_ bytes: Range<Int64>, of record: ReplicaRecord) -> ReplicaRecord? {
        guard var current = index[record.item.id], current.item.version.content == record.item.version.content
        else { return nil }
        if current.cachedVersion != current.item.version.content {
            current.cachedVersion = current.item.version.content
            current.present = ByteRanges()
        }
        current.present.insert(bytes)
        index.put(current)
        return current
    }

    /// Fetches `download.range` and writes it into the replica file (on a
    /// thread of its own; the readers wait in `wait`).
    private func fetch(_ download: Download, _ record: ReplicaRecord) {
        let control = download.control
        var failure: ExtensionFailure?
        var fetched: Range<Int64>?
        do throws(ExtensionFailure) {
            let range = ByteRange(offset: download.range.lowerBound, length: Int64(download.range.count))
            let file = try calls.fetch(record.item.id, version: record.item.version.content, range: range, control)
            defer { unlink(file.path) }
            download.delivery.sync {}  // what was streamed is in the replica
            let streamed = download.streamedFrom == file.offset ? download.streamedThrough : nil
            let written = try write(file, into: record, from: streamed)
            fetched = written
            // A short answer (fewer bytes than asked, within the item) is
            // that request's error: its readers get EIO and an event, and
            // nobody fetches the same range again in a loop (issue 47).
            let wanted = download.range.lowerBound..<min(download.range.upperBound, record.item.size)
            if !wanted.isEmpty && (written.lowerBound > wanted.lowerBound || written.upperBound < wanted.upperBound) {
                throw ExtensionFailure(
                    .internalError,
                    "the extension answered bytes \(written.lowerBound)..<\(written.upperBound) of the "
                        + "\(wanted.lowerBound)..<\(wanted.upperBound) asked for")
            }
        } catch {
            failure = error
            if error.code == .noSuchItem { itemVanished(record.item.id) }
            if error.code == .conflict && !isCurrent(record) {
                // The replica moved on to a new version meanwhile: not this
                // request's error; its readers go on with the new version
                // (a descriptor opened on the old one reads ESTALE).
                failure = nil
            } else if error.code != .cancelled {
                report(
                    .error, lock.withLock { index.path(of: record.item.id) }, "fetch failed: \(error.message)",
                    errno: error.errno)
            }
        }
        download.delivery.sync {}
        let extensionDown = failure != nil && !calls.state.isRunning
        let streamed = download.streamedFrom.flatMap { from in download.streamedThrough.map { from..<$0 } }
        var saved: ReplicaRecord?
        lock.withLock {
            download.done = true
            download.failure = failure
            downloads[record.item.id]?.removeAll { $0 === download }
            if let failure { noteFailed(record.item.id, download.range, failure, extensionDown: extensionDown) }
            if let bytes = fetched ?? streamed, !bytes.isEmpty {
                saved = markPresent(bytes, of: record)
            }
            lock.broadcast()
        }
        if let saved { save([saved]) }
        if failure == nil { enforceQuota() }
    }

    /// Copies the staged bytes into the replica file at their offset and
    /// puts its time back (a download changes no item); those before item
    /// offset `from` are there already (streamed).
    private func write(_ file: FetchedFile, into record: ReplicaRecord, from: Int64? = nil) throws(ExtensionFailure)
        -> Range<Int64>
    {
        guard let path = located(record) else { throw ExtensionFailure(.noSuchItem, "the item is gone") }
        // Changed meanwhile: these bytes are of a version the file no
        // longer holds; the readers go on with the new one (issue 47).
        guard beginDownloadWrite(record) else {
            throw ExtensionFailure(.conflict, "the item changed during the download")
        }
        defer { endDownloadWrite(record.item.id) }
        let source = open(file.path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard source >= 0 else { throw ExtensionFailure(.internalError, "cannot open the staged file") }
        defer { close(source) }
        let length = min(file.length, max(0, record.item.size - file.offset))
        let skipped = min(length, max(0, (from ?? file.offset) - file.offset))
        do {
            ownWrite(record.inode)
            try folder.withFile(path, O_WRONLY, inode: record.inode) { target throws(ReplicaFolder.Failure) in
                try ReplicaFolder.copyContent(
                    source, from: skipped, to: target, at: file.offset + skipped, length: length - skipped, path)
                try ReplicaFolder.restoreTime(target, record.item.mtime, path)
            }
        } catch {
            throw ExtensionFailure(.internalError, "cannot write the download into \(path): \(error)")
        }
        return file.offset..<(file.offset + length)
    }

    private func register(_ control: RequestControl, for app: String?) {
        guard let app else { return }
        lock.withLock { appDownloads[app, default: []].append(control) }
    }

    private func unregister(_ control: RequestControl, for app: String?) {
        guard let app else { return }
        lock.withLock { appDownloads[app]?.removeAll { $0 === control } }
    }

    /// A revoke: the app's downloads and waits end (EINTR) at once.
    public func cancelDownloads(of app: String) {
        for control in lock.withLock({ appDownloads[app] ?? [] }) { control.cancel() }
        // And what its reads started that nobody waits on now: read-ahead
        // windows and streams its readers left (S42: a revoked app causes
        // no traffic).
        let started = lock.withLock {
            downloads.values.joined().filter { $0.app == app && $0.waiters == 0 && !$0.done }
        }
        for download in started { download.control.cancel() }
    }

    // MARK: Cache

    /// How many remote changes of `inode`'s content were applied (one
    /// open reads one edition: `ProviderContent.edition`).
    public func edition(inode: UInt64) -> UInt64 { lock.withLock { editions[inode] ?? 0 } }

    /// The app opened (or closed) a replica file: never evicted while open.
    public func opened(inode: UInt64) { lock.withLock { opens[inode, default: 0] += 1 } }
    public func released(inode: UInt64) {
        lock.withLock {
            opens[inode, default: 1] -= 1
            if opens[inode] == 0 { opens[inode] = nil }
        }
    }

    /// Bytes of content on disk.
    public var cachedBytes: Int64 {
        lock.withLock { index.all.reduce(0) { $0 + ($1.isFile ? $1.present.byteCount : 0) } }
    }

    /// Evicts least recently used content while over the quota; never a
    /// pinned, dirty or open item.
    func enforceQuota() {
        guard let quota = lock.withLock({ quotaBytes }) else { return }
        var total = cachedBytes
        guard total > quota else { return }
        let candidates = lock.withLock {
            index.all.filter {
                $0.isFile && !$0.pinned && $0.dirty == 0 && opens[$0.inode] == nil && !$0.present.isEmpty
            }
            .sorted { $0.lastUsed < $1.lastUsed }
        }
        for record in candidates where total > quota {
            let freed = record.present.byteCount
            if (try? evictItem(record.item.id)) == true {
                total -= freed
                onContentDropped?(record.inode)
            }
        }
    }

    /// Drops an item's content (it becomes a placeholder again).
    @discardableResult
    func evictItem(_ id: String) throws(ExtensionFailure) -> Bool {
        guard
            let (record, path) = lock.withLock({ () -> (ReplicaRecord, String)? in
                guard let record = index[id], let path = index.path(of: id) else { return nil }
                return (record, path)
            }), record.isFile
        else { return false }
        // The record says "not on disk" before the bytes go (a daemon killed
        // between the two re-fetches them), and no download writes meanwhile.
        let updated: ReplicaRecord? = lock.withLock {
            guard var updated = index[id], updated.dirty == 0, opens[updated.inode] == nil else { return nil }
            beginReplacingLocked(id)
            updated.present = ByteRanges()
            updated.pinned = false
            index.put(updated)
            return updated
        }
        guard let updated else { throw ExtensionFailure(.busy, "\(path) is open or not uploaded") }
        defer { endReplacing(id) }
        save([updated])
        ownWrite(record.inode)
        do {
            try folder.withFile(path, O_WRONLY, inode: record.inode) { file throws(ReplicaFolder.Failure) in
                guard ftruncate(file, 0) == 0, ftruncate(file, off_t(updated.item.size)) == 0 else {
                    throw .system(errno, "cannot empty \(path)")
                }
                try ReplicaFolder.restoreTime(file, updated.item.mtime, path)
            }
        } catch {
            throw ExtensionFailure(.internalError, "\(error)")
        }
        return true
    }
}
