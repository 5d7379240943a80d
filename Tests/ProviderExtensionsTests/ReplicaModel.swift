import Foundation
import Glibc
import Logging
import Policy
import Synchronization

@testable import ProviderExtensions

/// The replica under a live remote, next to a model of what apps and the
/// remote did (issue 47, SPEC S42, S43, S49), in the shape of the node
/// table's model test. The real engine (`ExtensionProvider`) serves a real
/// replica folder and a real `ReplicaStore` file; `ModelRemote` is the
/// extension; the model drives the engine the way the mount does
/// (`ScopeFileSystem+Files`, `ExtensionContent`: prepareOpen, willWrite and
/// didWrite around each write, settled on fsync and close, a read's
/// edition check) and the sync thread's pull and push, one step at a time,
/// and after every step checks:
///
/// - every byte of a file the replica says it has (its record's present
///   ranges) is that version's byte, and the file's size is the item's;
/// - a file apps changed is in the queue (dirty, or unknown to the
///   records) until the remote holds exactly its content: no write is
///   taken for uploaded that it did not carry;
/// - every read of an open file is of the version it was opened on, or
///   ESTALE once the remote replaced it (never a mixture);
/// - no upload carries bytes that no app wrote;
/// - at the end, with the faults off and every file closed, the queue
///   drains and the remote holds every file apps left, byte for byte.
final class ReplicaModel: @unchecked Sendable {
    /// What an app would read of a file now.
    struct File {
        var content: [UInt8]
        /// Remote replacements applied to it (a descriptor opened before
        /// one reads ESTALE).
        var epoch = 0
        /// Apps changed it since the remote last held its content.
        var local = false
        /// The content version the model last saw the record at.
        var version: String?
    }

    /// An app's open descriptor, as the mount holds it.
    struct Handle {
        var descriptor: Int32
        var inode: UInt64
        /// The edition it was opened (or created) at.
        var edition: UInt64?
        var epoch: Int
        var writable: Bool
        var wrote = false
        /// Opened across a remote replacement (the open's download met the
        /// new version and applied it): of the epoch the step's reconcile
        /// gives the file, not of the one before.
        var ofNextEpoch = false
    }

    enum ReadResult: Equatable {
        case bytes([UInt8])
        case failed(Int32)
    }

    let seed: UInt64
    let base: String
    let replicaRoot: String
    let staging: String
    let storePath: String
    let remote: ModelRemote
    var tunables = ReplicaTunables()
    private(set) var life = DaemonLife()
    private(set) var provider: ExtensionProvider!
    var random: SeededGenerator
    private(set) var files: [UInt64: File] = [:]
    /// Files gone from the replica that a descriptor still holds.
    private var gone: [UInt64: File] = [:]
    private(set) var handles: [Handle] = []
    /// Files apps removed (their changes need not reach the remote).
    var removedByApps: Set<UInt64> = []
    /// The replica's tree now: path by inode (files only).
    private(set) var paths: [UInt64: String] = [:]
    /// Hashes of every content an app made, and conflict copies the
    /// engine reported.
    private let produced = Shared<Set<UInt64>>([])
    private let uploadProblems = Shared<[String]>([])
    private let conflictCopies = Shared<[String]>([])
    /// The announced copies whose original became the remote's version
    /// ("changed here and remotely"); the others are an app's file moved
    /// aside for the remote's item ("made" or "moved here").
    private let copiesOfResetFiles = Shared<Set<String>>([])
    /// `SCOPEFS_MODEL_TRACE=1`: the log shows the engine's events and,
    /// after each step, every file whose model, record or bytes changed
    /// (how seeds 7, 12 and 19 were read).
    static let traces = ProcessInfo.processInfo.environment["SCOPEFS_MODEL_TRACE"] == "1"
    private let tracedEvents = Shared<[String]>([])
    private var tracedFiles: [UInt64: String] = [:]
    /// The daemon died in this step; the files it left with no record.
    private var daemonDied = false
    private var leftByDeadDaemon: Set<UInt64> = []
    private(set) var log: [String] = []
    private(set) var problems: [String] = []
    let names = ["a.txt", "b.txt", "c.txt", "d.txt"]
    let folders = ["", "sub"]
    var subID = ""
    private var clock = 1_000.0
    /// The time the engine names conflict copies by: a second per step.
    private let conflictTime = Shared(Date(timeIntervalSince1970: 1_800_000_000))

    init(seed: UInt64) throws {
        self.seed = seed
        random = SeededGenerator(seed: seed)
        base = NSTemporaryDirectory() + "scopefs-model-\(getpid())-\(seed)-\(UInt32.random(in: 0...UInt32.max))"
        replicaRoot = base + "/replica"
        staging = base + "/staging"
        storePath = base + "/replica.sqlite"
        for folder in [base, replicaRoot, staging] {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        }
        remote = ModelRemote(staging: staging)
        tunables.wholeFileLimit = 8 << 10
        tunables.block = 4 << 10
        tunables.maxWindow = 64 << 10
        tunables.windowGrowth = 4
        // Only an fsync or a close makes a file being written ready to go
        // up: the model's steps take no time, so "quiet" would be random.
        tunables.writeQuiet = 3600
        // Each of the model's reads is an app's, never the kernel's retry
        // of a readahead: a failure answers none of them (seed 7 read 44
        // steps after a short fetch, within the 0.25 s all 400 took).
        tunables.failureRetryWindow = 0
        // Conflict copies are named by the model's clock, not the wall's:
        // a seed replays the same names (a second conflict within one
        // "second" gets " 2" the same way each run).
        let conflictTime = conflictTime
        tunables.conflictClock = { conflictTime.withLock { $0 } }
        let produced = produced
        let problems = uploadProblems
        remote.onUpload = { [remote] bytes, name in
            let hash = ModelRemote.hash(bytes)
            if !produced.withLock({ $0.contains(hash) }) && !remote.holds(hash) {
                problems.withLock { $0.append("an upload of \(name) carried \(bytes.count) bytes no app wrote") }
            }
        }
        subID = remote.putFolder(name: "sub")
        for name in names.prefix(3) { remote.put(name: name, bytes: content(), mtime: tick()) }
        remote.put(name: "a.txt", parent: subID, bytes: content(), mtime: tick())
        try startDaemon()
        try engine("pull") { () throws(ExtensionFailure) in try self.provider.pull() }
        reconcile()
    }

    deinit {
        for handle in handles { Glibc.close(handle.descriptor) }
        try? FileManager.default.removeItem(atPath: base)
    }

    // MARK: Daemon lives

    /// A daemon starts on the replica folder and store its last life left.
    func startDaemon() throws {
        life = DaemonLife()
        let copies = conflictCopies
        let resets = copiesOfResetFiles
        provider = try ExtensionProvider(
            providerID: "model", calls: LifeCalls(remote, life), folder: ReplicaFolder(root: replicaRoot),
            writer: LifeWriter(folder: ReplicaFolder(root: replicaRoot), life: life),
            store: ReplicaStore(path: storePath), staging: staging, tunables: tunables,
            logger: .init(label: "model") { _ in SwiftLogNoOpLogHandler() },
            events: { [traced = tracedEvents] event in
                if event.kind == .conflict, let path = event.path {
                    copies.withLock { $0.append(path) }
                    if event.message.contains("changed here and remotely") { resets.withLock { _ = $0.insert(path) } }
                }
                if Self.traces { traced.withLock { $0.append("\(event.kind) \(event.path ?? "-"): \(event.message)") } }
            })
    }

    /// The daemon is killed: its threads do nothing more, its apps'
    /// descriptors are gone (the mount died with it).
    func killDaemon() throws {
        life.kill()
        daemonDied = true
        for handle in handles { Glibc.close(handle.descriptor) }
        handles = []
        gone = [:]
        try startDaemon()
    }

    /// Runs one engine call on a thread of its own, as the sync thread
    /// does; a crash point inside it parks that thread for good, and the
    /// next daemon starts.
    @discardableResult
    func engine(_ what: String, _ body: @escaping @Sendable () throws(ExtensionFailure) -> Void) throws -> Bool {
        let done = DispatchSemaphore(value: 0)
        let failure = Mutex<ExtensionFailure?>(nil)
        let life = life
        Thread.detachNewThread {
            do throws(ExtensionFailure) { try body() } catch { failure.withLock { $0 = error } }
            done.signal()
        }
        while done.wait(timeout: .now() + 0.005) == .timedOut {
            if life.diedInStep {
                note("  the daemon died inside \(what)")
                try killDaemon()
                return false
            }
        }
        if let error = failure.withLock({ $0 }) { note("  \(what): \(error.code.name): \(error.message)") }
        settleDownloads()
        return true
    }

    /// Waits until no download runs (read-ahead windows run on after
    /// their reader), so that a step starts from a quiet replica.
    func settleDownloads() {
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if provider.lock.withLock({ provider.downloads.values.allSatisfy(\.isEmpty) }) { return }
            usleep(1000)
        }
        problem("a download never ended")
    }

    // MARK: The mount's side (as ScopeFileSystem+Files and ExtensionContent drive it)

    func open(_ path: String, writes: Bool, truncates: Bool) -> Int32? {
        guard let inode = inode(at: path) else { return nil }
        let editionBefore = provider.edition(inode: inode)
        do throws(ExtensionFailure) {
            if writes && !truncates && provider.missingContent(inode: inode) != nil {
                try provider.prepareOpen(
                    inode: inode, writes: writes, truncates: truncates, app: "app", control: RequestControl())
            } else {
                provider.opened(inode: inode)
            }
        } catch {
            note("  open \(path): \(error.code.name)")
            return error.errno
        }
        if writes && truncates { provider.willWrite(inode: inode) }
        let descriptor = Glibc.open(replicaRoot + "/" + path, (writes ? O_RDWR : O_RDONLY) | (truncates ? O_TRUNC : 0))
        if writes && truncates { provider.didWrite(inode: inode) }
        guard descriptor >= 0 else {
            provider.released(inode: inode)
            return errno
        }
        // The mount opens the name and checks it is still the node's file:
        // another (a catch-up inside the open moved this one away, seed
        // 686) is ESTALE, and the kernel looks the name up again.
        var opened = stat()
        guard fstat(descriptor, &opened) == 0, UInt64(opened.st_ino) == inode else {
            Glibc.close(descriptor)
            provider.released(inode: inode)
            return ESTALE
        }
        var handle = Handle(
            descriptor: descriptor, inode: inode, edition: provider.edition(inode: inode),
            epoch: files[inode]?.epoch ?? 0, writable: writes)
        handle.ofNextEpoch = handle.edition != editionBefore
        if truncates {
            handle.wrote = true
            changeContent(inode) { $0 = [] }
        }
        handles.append(handle)
        return nil
    }

    /// `open(O_CREAT | O_EXCL)` of a new name (the mount's `create`).
    func create(_ path: String) -> Bool {
        let descriptor = Glibc.open(replicaRoot + "/" + path, O_RDWR | O_CREAT | O_EXCL, 0o644)
        guard descriptor >= 0 else { return false }
        var info = stat()
        fstat(descriptor, &info)
        let inode = UInt64(info.st_ino)
        files[inode] = File(content: [], local: true)
        paths[inode] = path
        provider.created(inode: inode)
        provider.opened(inode: inode)  // as the mount's create (`created(_:open:)`)
        // The mount's create keeps the edition too: once the file is up and
        // the remote replaces it, its writes are ESTALE (S49), not bytes in
        // the new version's placeholder.
        handles.append(
            Handle(
                descriptor: descriptor, inode: inode, edition: provider.edition(inode: inode), epoch: 0,
                writable: true))
        provider.localChanged()
        return true
    }

    /// A read through `handle`: ESTALE if the remote replaced the file
    /// since its open, else the download it needs, then the bytes.
    func read(_ handle: Handle, offset: Int64, length: Int) -> ReadResult {
        if let edition = handle.edition, provider.edition(inode: handle.inode) != edition { return .failed(ESTALE) }
        if provider.missingContent(inode: handle.inode) != nil {
            do throws(ExtensionFailure) {
                try provider.prepareRead(
                    inode: handle.inode, offset: offset, length: length, app: "app", control: RequestControl(),
                    edition: handle.edition)
            } catch {
                return .failed(error.errno)
            }
        }
        var buffer = [UInt8](repeating: 0, count: length)
        let count = pread(handle.descriptor, &buffer, length, off_t(offset))
        guard count >= 0 else { return .failed(errno) }
        return .bytes(Array(buffer[0..<count]))
    }

    /// A write through `handle` (the mount's writeTarget and writeFinished):
    /// ESTALE once the remote replaced the file it was opened on.
    func write(_ index: Int, offset: Int64, bytes: [UInt8], before: [UInt64: File]? = nil) {
        let handle = handles[index]
        let stale = (before ?? files)[handle.inode].map { $0.epoch != handle.epoch } ?? false
        guard provider.willWrite(inode: handle.inode, edition: handle.edition) else {
            if !stale && (before ?? files)[handle.inode] != nil && !replacedInStep(handle.inode) {
                problem("a write through \(describe(index)) was refused (ESTALE) with no remote edit")
            }
            return note("  errno \(ESTALE)")
        }
        if stale { problem("a write through \(describe(index)), opened before a remote edit, was not refused") }
        let written = bytes.withUnsafeBytes { pwrite(handle.descriptor, $0.baseAddress, bytes.count, off_t(offset)) }
        provider.didWrite(inode: handle.inode)
        handles[index].wrote = true
        guard written == bytes.count else { return problem("a write of \(bytes.count) bytes wrote \(written)") }
        changeContent(handle.inode) { content in
            if content.count < Int(offset) { content += [UInt8](repeating: 0, count: Int(offset) - content.count) }
            let end = Int(offset) + bytes.count
            if content.count < end { content += [UInt8](repeating: 0, count: end - content.count) }
            content.replaceSubrange(Int(offset)..<end, with: bytes)
        }
    }

    /// Whether the engine took in a remote version of `inode` the model has
    /// not seen yet: a write in a hook, inside the pull that replaces the
    /// file, comes after the replacement's new edition.
    private func replacedInStep(_ inode: UInt64) -> Bool {
        let version = provider.lock.withLock {
            provider.index.id(ofInode: inode).flatMap { provider.index[$0]?.item.version.content }
        }
        return version != nil && version != files[inode]?.version
    }

    /// `ftruncate` through `handle` (the mount's setattr with a size).
    func truncate(_ index: Int, to size: Int64) {
        let handle = handles[index]
        do throws(ExtensionFailure) {
            if size != 0 { try provider.materializeWhole(inode: handle.inode, app: "app", control: RequestControl()) }
        } catch {
            return note("  truncate: \(error.code.name)")
        }
        guard provider.willWrite(inode: handle.inode, edition: handle.edition) else { return note("  errno \(ESTALE)") }
        let result = ftruncate(handle.descriptor, off_t(size))
        provider.didWrite(inode: handle.inode)
        provider.localChanged()
        handles[index].wrote = true
        guard result == 0 else { return problem("ftruncate failed: \(errno)") }
        changeContent(handle.inode) { content in
            if content.count > Int(size) {
                content.removeSubrange(Int(size)...)
            } else {
                content += [UInt8](repeating: 0, count: Int(size) - content.count)
            }
        }
    }

    func fsync(_ index: Int) {
        let handle = handles[index]
        Glibc.fsync(handle.descriptor)
        if handle.writable { provider.settled(inode: handle.inode) }
    }

    func close(_ index: Int) {
        let handle = handles.remove(at: index)
        Glibc.close(handle.descriptor)
        provider.released(inode: handle.inode)
        if handle.wrote { provider.settled(inode: handle.inode) }
        if !handles.contains(where: { $0.inode == handle.inode }) { gone[handle.inode] = nil }
    }

    /// An app's content change: the model's copy follows, and its bytes
    /// are ones an app wrote.
    private func changeContent(_ inode: UInt64, _ change: (inout [UInt8]) -> Void) {
        var file = files[inode] ?? gone[inode] ?? File(content: [])
        change(&file.content)
        file.local = true
        let hash = ModelRemote.hash(file.content)
        produced.withLock { _ = $0.insert(hash) }
        if files[inode] != nil || gone[inode] == nil { files[inode] = file } else { gone[inode] = file }
    }

    // MARK: After each step

    /// Brings the model up to what the engine did in the step, checking
    /// that each change is one the engine may make.
    func reconcile(before: [UInt64: File]? = nil) {
        let records = provider.lock.withLock { provider.index.all.filter(\.isFile) }
        let byInode = Dictionary(records.map { ($0.inode, $0) }, uniquingKeysWith: { a, _ in a })
        let tree = walk()
        // Conflict copies: the local edit moved to a new file beside the item.
        // (A daemon killed after the copy and before its event leaves one unannounced.)
        // (A remote item whose name is a conflict copy's, an upload of one,
        // comes with its record: a placeholder, not a copy.)
        // (A remote item named as a conflict copy, its placeholder left
        // with no record by a crash, is no copy: seed 87.)
        let unannounced = tree.filter {
            files[$0.key] == nil && byInode[$0.key] == nil && Self.original(ofConflictCopy: $0.value) != nil
                && !isLeftByDeadDaemon($0.key, at: $0.value)
        }
        let announced = conflictCopies.withLock { list in
            defer { list = [] }
            return list
        }
        for copy in Set(announced + unannounced.values) {
            // (A copy may reuse the inode number of a file removed in the
            // same step, which the model still holds: seed 16.)
            guard let inode = tree.first(where: { $0.value == copy })?.key, files[inode] == nil || byInode[inode] == nil
            else { continue }
            let bytes = contentOnDisk(copy) ?? []
            if !produced.withLock({ $0.contains(ModelRemote.hash(bytes)) }) {
                problem("the conflict copy \(copy) holds bytes no app wrote")
            }
            // An app's file the engine moved aside keeps its epoch (its
            // descriptors are on it still), and what is at its name now is
            // the remote's item as it was, not a new edition of it (seed
            // 260: a descriptor of an item renamed there remotely).
            let originalReset =
                copiesOfResetFiles.withLock { $0.remove(copy) != nil }
                || (!announced.contains(copy) && files[inode] == nil)
            files[inode] = File(content: bytes, epoch: files[inode]?.epoch ?? 0, local: true)
            note("  conflict copy \(copy) (\(bytes.count) bytes)")
            // The original shows the remote version now: a new edition.
            if originalReset, let original = Self.original(ofConflictCopy: copy),
                let (originalInode, _) = tree.first(where: { $0.value == original }),
                var file = files[originalInode], let record = byInode[originalInode], record.dirty == 0
            {
                file.local = false
                file.version = record.item.version.content
                file.content = remote.bytes(ofVersion: record.item.version.content) ?? []
                file.epoch += 1
                files[originalInode] = file
            } else if let original = Self.original(ofConflictCopy: copy) {
                let inode = tree.first(where: { $0.value == original })?.key
                note(
                    "  its original \(original): inode \(inode.map(String.init) ?? "none"), "
                        + "modelled \(inode.flatMap { files[$0] } != nil), "
                        + "record dirty \(inode.flatMap { byInode[$0]?.dirty }.map(String.init) ?? "no record")")
            }
        }
        for problem in uploadProblems.withLock({ list in
            defer { list = [] }
            return list
        }) { self.problem(problem) }
        for (inode, path) in tree {
            let record = byInode[inode]
            guard var file = files[inode] else {
                // A new remote item: a placeholder of its version.
                guard let record, record.dirty == 0 else {
                    if record == nil, isLeftByDeadDaemon(inode, at: path) { continue }
                    problem("\(path) appeared with no record and no app made it")
                    continue
                }
                leftByDeadDaemon.remove(inode)
                files[inode] = File(
                    content: remote.bytes(ofVersion: record.item.version.content) ?? [],
                    version: record.item.version.content)
                continue
            }
            // (A clean record with a problem, a move the store refused,
            // takes remote changes as a clean one does.)
            if let record, record.dirty == 0, record.problem == nil || !file.local {
                let version = record.item.version.content
                if file.local {
                    // Taken for uploaded: the remote must hold exactly this.
                    if remote.bytes(ofVersion: version) == file.content {
                        file.local = false
                    } else if remote.uploaded(file.content, of: record.item.id, before: version) {
                        // It went up, and an edit elsewhere replaced it
                        // within the step (the last writer wins): a new
                        // edition of the remote's version.
                        file.local = false
                        file.content = remote.bytes(ofVersion: version) ?? []
                        file.epoch += 1
                    } else {
                        let held = remote.bytes(ofVersion: version)?.count ?? -1
                        problem(
                            "\(path) is not in the queue, but the remote's \(version) holds \(held) bytes, not the "
                                + "\(file.content.count) apps wrote")
                        file.local = false
                        file.content = remote.bytes(ofVersion: version) ?? []
                        file.epoch += 1
                    }
                } else if file.version != version {
                    // A remote change was applied: a new edition.
                    file.content = remote.bytes(ofVersion: version) ?? []
                    file.epoch += 1
                }
                file.version = version
            }
            files[inode] = file
        }
        for (inode, file) in files where tree[inode] == nil {
            files[inode] = nil
            if file.local && !removedByApps.contains(inode) {
                problem("an app's change of inode \(inode), not uploaded, was removed from the replica")
            }
            if handles.contains(where: { $0.inode == inode }) { gone[inode] = file }
        }
        paths = tree
        for index in handles.indices where handles[index].ofNextEpoch {
            handles[index].ofNextEpoch = false
            handles[index].epoch = (files[handles[index].inode] ?? gone[handles[index].inode])?.epoch ?? 0
        }
        checkReplica(records, tree)
        daemonDied = false
        if Self.traces { trace(records: byInode, tree: tree) }
    }

    /// Whether the file at `path`, which no record names, is a placeholder
    /// the daemon made just before it died, its record not saved: the
    /// next pull or push takes it as that item's (adoptOwnPlaceholder);
    /// until then it is no app's, and nothing of it may go up.
    private func isLeftByDeadDaemon(_ inode: UInt64, at path: String) -> Bool {
        var info = stat()
        // (An empty file is no such placeholder's sign: a conflict copy of
        // an app's truncate the daemon died before announcing is one,
        // seed 390; an empty item's placeholder the journal adopts.)
        guard daemonDied || leftByDeadDaemon.contains(inode), lstat(replicaRoot + "/" + path, &info) == 0,
            info.st_blocks == 0, info.st_size > 0
        else { return false }
        leftByDeadDaemon.insert(inode)
        return true
    }

    /// One line per file whose model, record or bytes changed in the step
    /// (a hash of the content after its length), then the engine's events.
    private func trace(records: [UInt64: ReplicaRecord], tree: [UInt64: String]) {
        for event in tracedEvents.withLock({ list in
            defer { list = [] }
            return list
        }) { note("    event \(event)") }
        func bytes(_ content: [UInt8]) -> String { "\(content.count)/\(ModelRemote.hash(content) % 1000)" }
        for (inode, path) in tree.sorted(by: { $0.key < $1.key }) {
            let model = files[inode].map {
                "\(bytes($0.content)) local \($0.local) \($0.version ?? "-") epoch \($0.epoch)"
            }
            let record = records[inode].map {
                "\($0.item.id) \($0.item.version.content) dirty \($0.dirty) cached \($0.cachedVersion ?? "-") "
                    + "size \($0.item.size) problem \($0.problem.map { "\($0)" } ?? "-")"
            }
            let line =
                "\(path) inode \(inode): model \(model ?? "none"); record \(record ?? "none"); disk "
                + "\(contentOnDisk(path).map(bytes) ?? "none"); edition \(provider.edition(inode: inode))"
            if tracedFiles[inode] != line {
                tracedFiles[inode] = line
                note("    file " + line)
            }
        }
    }

    /// The replica against its records and the model.
    private func checkReplica(_ records: [ReplicaRecord], _ tree: [UInt64: String]) {
        for record in records {
            guard let path = tree[record.inode] else {
                // Removed by an app: the next push deletes it remotely.
                if removedByApps.contains(record.inode) || record.inode == ReplicaIndex.noFile { continue }
                // Deleted remotely, and the daemon died between removing the
                // file and its record: the next push's delete meets
                // `noSuchItem` and drops the record (the other order would
                // leave an unknown file, created anew).
                if !remote.has(record.item.id) { continue }
                problem("the record of \(record.item.name) names inode \(record.inode), which the replica lacks")
                continue
            }
            var info = stat()
            guard lstat(replicaRoot + "/" + path, &info) == 0 else { continue }
            // A clean record with a problem (a move the store refused) holds
            // what a clean one holds: its version's bytes where present,
            // holes elsewhere, and no app's bytes waiting to go up.
            if record.dirty != 0 {
                if let file = files[record.inode], let disk = contentOnDisk(path), disk != file.content {
                    problem("\(path) waits to go up with \(disk.count) bytes, not the \(file.content.count) apps wrote")
                }
                continue
            }
            if Int64(info.st_size) != record.item.size {
                problem("\(path): its record says \(record.item.size) bytes, the file holds \(info.st_size)")
            }
            guard record.cachedVersion == record.item.version.content,
                let expected = remote.bytes(ofVersion: record.item.version.content),
                let disk = contentOnDisk(path)
            else { continue }
            for range in record.present.ranges {
                let lower = Int(range.lowerBound)
                let upper = Int(min(range.upperBound, Int64(expected.count)))
                guard lower < upper, upper <= disk.count else {
                    problem("\(path): present \(range) lies past the file's \(disk.count) bytes")
                    continue
                }
                if disk[lower..<upper] != expected[lower..<upper] {
                    problem("\(path): bytes \(range) on disk are not those of \(record.item.version.content)")
                }
            }
        }
        // The queue: every file apps changed and the remote lacks.
        for (inode, file) in files where file.local {
            guard let path = tree[inode] else { continue }
            let state = provider.state(inode: inode)
            if !["dirty", "uploading", "conflict", "error"].contains(state ?? "") {
                problem("\(path) holds an app's change not uploaded, but its state is \(state ?? "nil")")
            }
        }
        let queued = provider.status.queued
        // (A move an app made and the store has not got is queued too.)
        let moved = records.filter { record in
            guard record.dirty == 0, record.item.id != ExtensionItem.rootID, let here = tree[record.inode] else {
                return false
            }
            return here != provider.lock.withLock { provider.index.path(of: record.item.id) }
        }
        let dirty = records.filter { $0.dirty != 0 }.count + unknownFiles().count + moved.count
        if queued != dirty { problem("status counts \(queued) queued, the replica has \(dirty) to send") }
    }

    /// Whether the store still has the item the replica file `inode` is of.
    private func remoteHolds(inode: UInt64) -> Bool {
        guard let id = provider.lock.withLock({ provider.index.id(ofInode: inode) }) else { return false }
        return remote.has(id)
    }

    /// A read's answer against the model as it was before the step: one
    /// version per open, or ESTALE once that version was replaced.
    func check(
        read result: ReadResult, of handle: Handle, offset: Int64, length: Int, before: [UInt64: File],
        faulty: Bool
    ) {
        let file = before[handle.inode] ?? gone[handle.inode]
        let where_ = "read \(length) at \(offset) of \(paths[handle.inode] ?? "inode \(handle.inode)")"
        switch result {
        case .failed(let code):
            if code == ESTALE { return }  // at or after a replacement: allowed any time after one began
            if faulty && (code == EIO || code == ENOENT) { return }
            if before[handle.inode] == nil && (code == ENOENT || code == EIO) { return }
            // Deleted remotely, the delete not pulled yet: "the item is gone
            // remotely" is ENOENT (docs/PROVIDERS.md); no bytes of another
            // version were read.
            if code == ENOENT && !remoteHolds(inode: handle.inode) { return }
            problem("\(where_) failed with errno \(code)")
        case .bytes(let bytes):
            guard let file else { return }
            if file.epoch != handle.epoch {
                return problem("\(where_) gave \(bytes.count) bytes of a descriptor opened before a remote edit")
            }
            let lower = min(Int(offset), file.content.count)
            let upper = min(Int(offset) + length, file.content.count)
            let expected = Array(file.content[lower..<upper])
            if bytes != expected {
                let first =
                    zip(bytes, expected).enumerated().first { $0.element.0 != $0.element.1 }?.offset
                    ?? min(bytes.count, expected.count)
                problem(
                    "\(where_) gave \(bytes.count) bytes, expected \(expected.count); they differ from byte "
                        + "\(Int(offset) + first)")
            }
        }
    }

    // MARK: The end: every write on the remote

    /// Closes every file, turns the faults off and syncs until the queue
    /// is empty; then the remote must hold every file apps left.
    func drain() throws {
        while !handles.isEmpty { close(0) }
        remote.disarmAll()
        if !remote.isRunning { remote.restart() }
        for _ in 0..<6 {
            try engine("pull") { () throws(ExtensionFailure) in try self.provider.pull() }
            try engine("push") { () throws(ExtensionFailure) in try self.provider.push() }
            try engine("pull") { () throws(ExtensionFailure) in try self.provider.pull() }
            reconcile()
            if provider.status.queued == 0 && !files.values.contains(where: \.local) && unknownFiles().isEmpty {
                break
            }
        }
        // What is left in the queue, and why it stays (shown with a failure).
        let left = provider.lock.withLock { provider.index.all.filter { $0.dirty != 0 || $0.problem != nil } }
        for record in left {
            let (path, activity) = provider.lock.withLock {
                (provider.index.path(of: record.item.id), provider.writeActivity.files[record.inode])
            }
            note(
                "  still queued: \(path ?? record.item.name) (\(record.item.id)), dirty \(record.dirty), "
                    + "\(record.problem ?? "no problem"), at \(provider.located(record) ?? "no file"), "
                    + "activity \(activity.map { String(describing: $0) } ?? "none")")
        }
        if !left.isEmpty {
            for (id, stored) in remote.items.sorted(by: { $0.key < $1.key }) where id != ExtensionItem.rootID {
                let parent = stored.item.parent == subID ? "sub/" : ""
                note("  remote: \(id) at \(parent)\(stored.item.name), \(stored.bytes.count) bytes")
            }
        }
        for path in unknownFiles() { problem("\(path) never went up") }
        if provider.status.queued != 0 { problem("\(provider.status.queued) items still queued after the drain") }
        // Every file in the replica is an item with the same bytes.
        let records = provider.lock.withLock { provider.index.all.filter(\.isFile) }
        let remoteItems = remote.items
        for (inode, path) in paths {
            guard let record = records.first(where: { $0.inode == inode }),
                let stored = remoteItems[record.item.id]
            else { continue }
            if let file = files[inode], stored.bytes != file.content {
                problem("\(path): the remote holds \(stored.bytes.count) bytes, apps left \(file.content.count)")
            }
        }
        // And every remote item is in the replica where the remote has it.
        for (id, stored) in remoteItems where stored.item.kind == .file {
            guard let record = records.first(where: { $0.item.id == id }), let path = paths[record.inode] else {
                problem("the remote's \(stored.item.name) (\(id)) is not in the replica")
                continue
            }
            let expected = (stored.item.parent == subID ? "sub/" : "") + stored.item.name
            if path != expected { problem("the remote's \(expected) is at \(path) in the replica") }
        }
    }

    private func unknownFiles() -> [String] {
        let known = Set(provider.lock.withLock { provider.index.all.map(\.inode) })
        return paths.filter { !known.contains($0.key) }.map(\.value).sorted()
    }

    // MARK: Helpers

    func note(_ line: String) { log.append(line) }

    func problem(_ text: String) { problems.append(text) }

    /// The next step happens a second later for conflict names.
    func nextSecond() { conflictTime.withLock { $0 = $0.addingTimeInterval(1) } }

    func tick() -> Double {
        clock += 1.25
        return clock
    }

    /// Random bytes of a size the model picks: empty, small, about a
    /// block, several blocks (whole-file and ranged fetches).
    func content(size: Int? = nil) -> [UInt8] {
        let count =
            size
            ?? [
                0, Int.random(in: 1...200, using: &random), Int.random(in: 3000...9000, using: &random),
                Int.random(in: 9000...40000, using: &random),
            ].randomElement(using: &random)!
        var bytes = [UInt8](repeating: 0, count: count)
        var word: UInt64 = 0
        for index in 0..<count {
            if index % 8 == 0 { word = random.next() }
            bytes[index] = UInt8(truncatingIfNeeded: word >> (8 * UInt64(index % 8)))
        }
        return bytes
    }

    func inode(at path: String) -> UInt64? {
        var info = stat()
        guard lstat(replicaRoot + "/" + path, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return nil }
        return UInt64(info.st_ino)
    }

    func contentOnDisk(_ path: String) -> [UInt8]? {
        FileManager.default.contents(atPath: replicaRoot + "/" + path).map { [UInt8]($0) }
    }

    /// The replica's files: path by inode.
    func walk() -> [UInt64: String] {
        var tree: [UInt64: String] = [:]
        for folder in folders {
            let full = folder.isEmpty ? replicaRoot : replicaRoot + "/" + folder
            for name in (try? FileManager.default.contentsOfDirectory(atPath: full)) ?? [] {
                let path = folder.isEmpty ? name : folder + "/" + name
                if let inode = inode(at: path) { tree[inode] = path }
            }
        }
        return tree
    }

    /// `a.txt` for `a (conflict 2026-12-02 031500).txt`, in the same folder.
    /// The last stamp is the copy's: `a (conflict T1) (conflict T2).txt` is
    /// the copy of `a (conflict T1).txt`, itself a copy uploaded since.
    static func original(ofConflictCopy copy: String) -> String? {
        let stamp = try! NSRegularExpression(pattern: #" \(conflict [0-9-]+ [0-9]+( [0-9]+)?\)"#)
        guard let last = stamp.matches(in: copy, range: NSRange(copy.startIndex..., in: copy)).last,
            let range = Range(last.range, in: copy)
        else { return nil }
        var original = copy
        original.removeSubrange(range)
        return original
    }
}

extension ModelRemote {
    /// Whether some version the store held has this content's hash.
    func holds(_ hash: UInt64) -> Bool { versionHashes.withLock { $0.contains(hash) } }
}

/// A value shared with the engine's threads, behind a lock.
final class Shared<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    func withLock<T>(_ body: (inout Value) -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body(&value)
    }
}
