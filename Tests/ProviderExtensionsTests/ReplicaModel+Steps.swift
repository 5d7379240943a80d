import Foundation
import Glibc
import Policy

@testable import ProviderExtensions

/// The model's random steps: what apps do through the mount, what the
/// remote does, what the sync thread does, the faults, and crashes.
extension ReplicaModel {
    /// One random step, then the check. Returns false once a problem was found.
    func step(_ number: Int) throws -> Bool {
        let before = files
        nextSecond()
        let roll = Int.random(in: 0..<100, using: &random)
        switch roll {
        case 0..<7: openFile(writes: false)
        case 7..<13: openFile(writes: true)
        case 13..<16: createFile()
        case 16..<30: readSomewhere(before)
        case 30..<42: writeSomewhere()
        case 42..<45: truncateSomewhere()
        case 45..<50:
            if let index = anyHandle() {
                note("fsync \(describe(index))")
                fsync(index)
            }
        case 50..<57:
            if let index = anyHandle() {
                note("close \(describe(index))")
                close(index)
            }
        case 57..<59: unlinkLocally()
        case 59..<61: renameLocally()
        case 61..<69: try editRemotely()
        case 69..<71: deleteRemotely()
        case 71..<73: renameRemotely()
        case 73..<75: createRemotely()
        case 75..<81: try pull()
        case 81..<87: try push()
        case 87..<89: evictSomething()
        case 89..<92: armFault()
        case 92..<95: interleave()
        case 95..<97: crashOrRestartExtension()
        case 97: try killDaemonNow()
        default: try killDaemonInside()
        }
        reconcile(before: before)
        return problems.isEmpty
    }

    // MARK: Apps

    func openFile(writes: Bool) {
        guard let path = anyPath() else { return }
        let truncates = writes && Int.random(in: 0..<4, using: &random) == 0
        note("open \(path) \(writes ? (truncates ? "for writing, truncated" : "for writing") : "for reading")")
        let faulty = !remote.armed.isEmpty || !remote.isRunning || remote.hasHook(.fetch)
        if let error = open(path, writes: writes, truncates: truncates) {
            if !faulty && error != ENOENT {
                problem("open \(path) failed with errno \(error) with no fault armed")
            }
            note("  errno \(error)")
        }
    }

    func createFile() {
        let folder = folders.randomElement(using: &random)!
        let name = "new-" + names.randomElement(using: &random)!
        let path = folder.isEmpty ? name : folder + "/" + name
        note("create \(path)")
        if !create(path) { note("  exists") }
    }

    func readSomewhere(_ before: [UInt64: File]) {
        guard let index = anyHandle() else { return }
        let handle = handles[index]
        let size = Int64((before[handle.inode] ?? files[handle.inode])?.content.count ?? 0)
        let offset =
            [0, Int64.random(in: 0...max(0, size), using: &random), max(0, size - 100), size + 10].randomElement(
                using: &random)!
        let length = [1, 100, 4096, 5000, 20000].randomElement(using: &random)!
        let faulty = !remote.armed.isEmpty || !remote.isRunning || remote.hasHook(.fetch)
        note("read \(length) at \(offset) of \(describe(index))")
        let result = read(handle, offset: offset, length: length)
        if case .failed(let code) = result { note("  errno \(code)") }
        check(read: result, of: handle, offset: offset, length: length, before: before, faulty: faulty)
    }

    func writeSomewhere() {
        guard let index = anyHandle(writable: true) else { return }
        let size = files[handles[index].inode]?.content.count ?? 0
        let offset = Int64([0, Int.random(in: 0...size, using: &random), size].randomElement(using: &random)!)
        let bytes = content(size: Int.random(in: 1...6000, using: &random))
        note("write \(bytes.count) at \(offset) of \(describe(index))")
        write(index, offset: offset, bytes: bytes, before: files)
    }

    func truncateSomewhere() {
        guard let index = anyHandle(writable: true) else { return }
        let size = files[handles[index].inode]?.content.count ?? 0
        let target = Int64([0, size / 2, size + 3000].randomElement(using: &random)!)
        note("ftruncate \(describe(index)) to \(target)")
        truncate(index, to: target)
    }

    func unlinkLocally() {
        guard let path = anyPath() else { return }
        note("unlink \(path)")
        let inode = inode(at: path)
        guard Glibc.unlink(replicaRoot + "/" + path) == 0 else { return }
        if let inode { removedByApps.insert(inode) }
        provider.localChanged()
    }

    func renameLocally() {
        guard let path = anyPath() else { return }
        let folder = folders.randomElement(using: &random)!
        let name = names.randomElement(using: &random)!
        let target = folder.isEmpty ? name : folder + "/" + name
        note("rename \(path) to \(target)")
        guard inode(at: target) == nil else { return note("  taken") }
        guard Glibc.rename(replicaRoot + "/" + path, replicaRoot + "/" + target) == 0 else { return }
        provider.localChanged()
    }

    // MARK: The remote

    func editRemotely() throws {
        guard let (id, stored) = anyRemoteFile() else { return }
        let old = stored.bytes.count
        let kind = Int.random(in: 0..<3, using: &random)
        let size = [
            Int.random(in: 0...max(0, old - 1), using: &random), old, old + Int.random(in: 1...30000, using: &random),
        ][kind]
        note("remote edit of \(stored.item.name) (\(id)): \(old) to \(size) bytes")
        remote.edit(id, to: content(size: size), mtime: tick())
        if Bool.random(using: &random) { try pull() }
    }

    func deleteRemotely() {
        guard let (id, stored) = anyRemoteFile() else { return }
        note("remote delete of \(stored.item.name) (\(id))")
        remote.remove(id)
    }

    func renameRemotely() {
        guard let (id, stored) = anyRemoteFile() else { return }
        let parent = Bool.random(using: &random) ? ExtensionItem.rootID : subID
        let name = names.randomElement(using: &random)!
        note("remote rename of \(stored.item.name) (\(id)) to \(parent == subID ? "sub/" : "")\(name)")
        remote.rename(id, to: name, parent: parent)
    }

    func createRemotely() {
        let parent = Bool.random(using: &random) ? ExtensionItem.rootID : subID
        let name = names.randomElement(using: &random)!
        guard !remote.isTaken(name, in: parent) else { return }
        note("remote create of \(parent == subID ? "sub/" : "")\(name)")
        remote.put(name: name, parent: parent, bytes: content(), mtime: tick())
    }

    // MARK: The sync thread, the owner, faults, crashes

    func pull() throws {
        note("pull")
        try engine("pull") { () throws(ExtensionFailure) in try self.provider.pull() }
    }

    func push() throws {
        note("push")
        try engine("push") { () throws(ExtensionFailure) in try self.provider.push() }
    }

    func evictSomething() {
        guard let path = anyPath() else { return }
        note("evict \(path)")
        do throws(ExtensionFailure) { _ = try provider.evict(path) } catch { note("  \(error.code.name)") }
    }

    func armFault() {
        let fault: ModelRemote.Fault = [.shortFetch, .longFetch, .failFetch, .loseAnswer].randomElement(using: &random)!
        note("arm \(fault.rawValue)")
        remote.arm(fault)
    }

    /// Arms something to happen inside the next call of a kind, where a
    /// real remote or app would be slow or quick enough to land.
    func interleave() {
        switch Int.random(in: 0..<3, using: &random) {
        case 0:
            // The remote edits the file being fetched, and the sync thread
            // pulls, while the fetch's answer (of the old version) is on its way.
            guard let (id, stored) = anyRemoteFile() else { return }
            let bytes = content(size: [0, stored.bytes.count / 3, stored.bytes.count].randomElement(using: &random)!)
            let mtime = tick()
            note(
                "inside the next fetch: remote edit of \(stored.item.name) (\(id)) to \(bytes.count) bytes, and a pull")
            remote.hook(.fetch) { [self] in
                remote.edit(id, to: bytes, mtime: mtime)
                try? provider.pull()
            }
        case 1:
            // An app writes while the upload of its file is on its way.
            guard let index = anyHandle(writable: true) else { return }
            let point: ModelRemote.HookPoint = Bool.random(using: &random) ? .modify : .create
            let inode = handles[index].inode
            let bytes = content(size: Int.random(in: 1...3000, using: &random))
            note("inside the next \(point.rawValue): a write of \(bytes.count) through \(describe(index))")
            remote.hook(point) { [self] in
                guard let index = handles.firstIndex(where: { $0.inode == inode && $0.writable }) else { return }
                write(index, offset: 0, bytes: bytes)
            }
        default:
            // An app writes while a remote change is applied (before its
            // rename; the content's decision comes after).
            guard let index = anyHandle(writable: true) else { return }
            let inode = handles[index].inode
            let bytes = content(size: Int.random(in: 1...3000, using: &random))
            note("before the next remote rename: a write of \(bytes.count) through \(describe(index))")
            life.hook(before: "rename") { [self] in
                guard let index = handles.firstIndex(where: { $0.inode == inode && $0.writable }) else { return }
                write(index, offset: 0, bytes: bytes)
            }
        }
    }

    func crashOrRestartExtension() {
        if remote.isRunning {
            note("the extension crashes")
            remote.crash()
        } else {
            note("the extension starts again")
            remote.restart()
        }
    }

    func killDaemonNow() throws {
        note("the daemon is killed")
        try killDaemon()
    }

    /// The daemon dies right after one of the replica writer's changes,
    /// inside the next pull or push.
    func killDaemonInside() throws {
        let operation = ["reset", "copy", "rename", "remove", "placeholder"].randomElement(using: &random)!
        note("the daemon dies after the next \(operation)")
        let current = life
        current.kill(after: operation)
        if Bool.random(using: &random) { try pull() } else { try push() }
        current.kill(after: nil)
    }

    // MARK: Choices

    func anyPath() -> String? { paths.values.sorted().randomElement(using: &random) }

    func anyHandle(writable: Bool = false) -> Int? {
        let candidates = handles.indices.filter { !writable || handles[$0].writable }
        return candidates.randomElement(using: &random)
    }

    func anyRemoteFile() -> (String, ModelRemote.Stored)? {
        remote.items.filter { $0.value.item.kind == .file }.sorted { $0.key < $1.key }.randomElement(using: &random)
    }

    func describe(_ index: Int) -> String {
        let handle = handles[index]
        return "descriptor \(handle.descriptor) (\(paths[handle.inode] ?? "gone inode \(handle.inode)"))"
    }
}
