import CFuse3
import Glibc

/// The reply buffer of one readdir or readdirplus request. The file system
/// adds entries until one does not fit; the bridge sends what was added.
public struct DirectoryListing {
    /// True for readdirplus: entries carry full attributes and a lookup.
    public let isPlus: Bool
    private let request: fuse_req_t
    private var buffer: [CChar]
    private(set) var used = 0

    init(request: fuse_req_t, capacity: Int, isPlus: Bool) {
        self.request = request
        self.isPlus = isPlus
        self.buffer = [CChar](repeating: 0, count: capacity)
    }

    /// Whether an entry named `name` still fits. For readdirplus ask before
    /// looking the entry up, so a lookup count is never taken for an entry
    /// that the kernel does not receive.
    public func fits(_ name: UnsafePointer<CChar>) -> Bool {
        let needed =
            isPlus
            ? fuse_add_direntry_plus(request, nil, 0, name, nil, 0) : fuse_add_direntry(request, nil, 0, name, nil, 0)
        return used + needed <= buffer.count
    }

    /// Adds a plain entry (readdir); only `st_ino` and the type bits of
    /// `st_mode` are used. Returns false when it did not fit.
    @discardableResult
    public mutating func add(name: UnsafePointer<CChar>, attributes: stat, nextOffset: Int64) -> Bool {
        var attributes = attributes
        let remaining = buffer.count - used
        let needed = buffer.withUnsafeMutableBufferPointer { storage in
            fuse_add_direntry(request, storage.baseAddress! + used, remaining, name, &attributes, off_t(nextOffset))
        }
        guard needed <= remaining else { return false }
        used += needed
        return true
    }

    /// Adds a full entry (readdirplus). `entry` nil adds a name the kernel
    /// will not cache (used for "." and "..").
    @discardableResult
    public mutating func addPlus(name: UnsafePointer<CChar>, entry: Entry?, fallback: stat, nextOffset: Int64) -> Bool {
        var param = fuse_entry_param()
        if let entry {
            param = Bridge.entryParam(entry, for: request)
        } else {
            param.attr = Bridge.shown(fallback, to: request)
        }
        let remaining = buffer.count - used
        let needed = buffer.withUnsafeMutableBufferPointer { storage in
            fuse_add_direntry_plus(request, storage.baseAddress! + used, remaining, name, &param, off_t(nextOffset))
        }
        guard needed <= remaining else { return false }
        used += needed
        return true
    }

    func reply() {
        buffer.withUnsafeBufferPointer { storage in
            _ = fuse_reply_buf(request, storage.baseAddress, used)
        }
    }
}
