import Foundation
import Glibc
import HostText
import Synchronization

/// Items' previews in memory (SPEC S50): those the extension gave, by item
/// and content version (an answer of none too, so a thousand listed
/// placeholders cost one `thumbnail` call each, once), and those apps
/// saved, by replica inode, until the item's next upload takes them along
/// and after it. Both are bounded by `quota` bytes, the least recently
/// used going first: an app that saves previews without end costs itself
/// old previews, never the daemon's memory.
final class PreviewCache: Sendable {
    struct Fetched {
        var version: String
        var bytes: [UInt8]?
        var used: UInt64
    }
    struct Saved {
        var bytes: [UInt8]
        var used: UInt64
    }
    struct State {
        var fetched: [String: Fetched] = [:]
        var saved: [UInt64: Saved] = [:]
        var total = 0
        var clock: UInt64 = 0
    }

    /// 16 MiB: 256 previews of the largest size, thousands of usual ones.
    static let quota = 16 << 20
    private let state = Mutex(State())

    func saved(inode: UInt64) -> [UInt8]? {
        state.withLock { state in
            state.clock += 1
            state.saved[inode]?.used = state.clock
            return state.saved[inode]?.bytes
        }
    }

    /// nil: not asked yet (or since the content changed); .some(nil): none.
    func fetched(id: String, version: String) -> [UInt8]?? {
        state.withLock { state in
            guard let entry = state.fetched[id], entry.version == version else { return nil }
            state.clock += 1
            state.fetched[id]?.used = state.clock
            return .some(entry.bytes)
        }
    }

    func keep(id: String, version: String, _ bytes: [UInt8]?) {
        state.withLock { state in
            state.total -= state.fetched[id]?.bytes?.count ?? 0
            state.clock += 1
            state.fetched[id] = Fetched(version: version, bytes: bytes, used: state.clock)
            state.total += bytes?.count ?? 0
            Self.trim(&state)
        }
    }

    func save(inode: UInt64, _ bytes: [UInt8]?) {
        state.withLock { state in
            state.total -= state.saved[inode]?.bytes.count ?? 0
            state.saved[inode] = nil
            guard let bytes else { return }
            state.clock += 1
            state.saved[inode] = Saved(bytes: bytes, used: state.clock)
            state.total += bytes.count
            Self.trim(&state)
        }
    }

    private static func trim(_ state: inout State) {
        while state.total > quota {
            let oldFetched = state.fetched.filter { $0.value.bytes != nil }.min { $0.value.used < $1.value.used }
            let oldSaved = state.saved.min { $0.value.used < $1.value.used }
            if let fetched = oldFetched, fetched.value.used < oldSaved?.value.used ?? .max {
                state.total -= fetched.value.bytes?.count ?? 0
                state.fetched[fetched.key] = nil
            } else if let saved = oldSaved {
                state.total -= saved.value.bytes.count
                state.saved[saved.key] = nil
            } else {
                return
            }
        }
    }
}

extension ExtensionProvider {
    /// The preview of the replica file `inode`: the one an app saved, else
    /// the extension's for the item's current content (asked once per
    /// content version, never a download). nil: none.
    public func thumbnail(inode: UInt64) -> [UInt8]? {
        if let known = knownThumbnail(inode: inode) { return known }
        let known: (id: String, version: String, said: Bool?)? = lock.withLock {
            guard let id = index.id(ofInode: inode), let record = index[id], record.isFile else { return nil }
            return (id, record.item.version.content, record.item.thumbnail)
        }
        guard let known, known.said != false, capabilities?.thumbnails == true else { return nil }
        let bytes: [UInt8]?
        do {
            bytes = try calls.thumbnail(known.id, size: ThumbnailLimits.size, RequestControl())
        } catch {
            // Not kept: the store may answer once it is reachable again.
            logger.info("\(providerID): no preview of \(known.id): \(error)")
            return nil
        }
        previews.keep(id: known.id, version: known.version, bytes)
        return bytes
    }

    /// The preview of `inode` when no call is needed to tell it (saved,
    /// cached, or none to ask for); nil: the extension must be asked,
    /// which the mount bounds as it bounds an app's download waits (S40).
    public func knownThumbnail(inode: UInt64) -> [UInt8]?? {
        if let saved = previews.saved(inode: inode) { return .some(saved) }
        let known: (id: String, version: String, said: Bool?)? = lock.withLock {
            guard let id = index.id(ofInode: inode), let record = index[id], record.isFile else { return nil }
            return (id, record.item.version.content, record.item.thumbnail)
        }
        guard let known, known.said != false, capabilities?.thumbnails == true else { return .some(nil) }
        return previews.fetched(id: known.id, version: known.version)
    }

    /// An app saved `bytes` as the preview of `inode` (nil: removed it). It
    /// goes up with the file's next upload (`stagedThumbnail`).
    public func saveThumbnail(inode: UInt64, _ bytes: [UInt8]?) {
        previews.save(inode: inode, bytes)
    }

    /// The preview an app saved for `inode`, copied into the upload
    /// staging folder (which the extension can read) for a `create` or
    /// `modify` of it; nil when there is none. The caller removes the copy
    /// after the call (`discardStaged`).
    func stagedThumbnail(inode: UInt64) -> String? {
        guard capabilities?.thumbnails == true, let bytes = previews.saved(inode: inode) else { return nil }
        let path = staging + "/thumbnail-" + UUID().uuidString + ".png"
        guard FileManager.default.createFile(atPath: path, contents: Data(bytes)) else { return nil }
        return path
    }

    func discardStaged(_ path: String?) {
        if let path { unlink(path) }
    }
}
