/// What the replica knows of one of the extension's items: the item as
/// the extension last described it, where it is on disk, and how much of
/// its content is there (SPEC S42, S43).
public struct ReplicaRecord: Sendable, Equatable {
    public var item: ExtensionItem
    /// The replica file's inode (the replica folder is one file system).
    public var inode: UInt64
    /// The content version of the bytes on disk; nil: none yet (dataless).
    public var cachedVersion: String?
    /// The byte ranges on disk, of `cachedVersion`.
    public var present: ByteRanges
    /// "Keep downloaded" (`scopefs pin`): downloaded in full, never evicted.
    public var pinned: Bool
    /// Counts local content changes; nonzero while one is not uploaded.
    /// An upload clears it only if no change came meanwhile.
    public var dirty: Int64
    /// Why the item is not in sync, when an upload failed for good or met a
    /// conflict (`user.scopefs.state` "error" / "conflict").
    public var problem: String?
    /// The last read or write through the mount (the quota's LRU order).
    public var lastUsed: Double

    public init(item: ExtensionItem, inode: UInt64) {
        self.item = item
        self.inode = inode
        cachedVersion = nil
        present = ByteRanges()
        pinned = false
        dirty = 0
        problem = nil
        lastUsed = 0
    }

    public var isFile: Bool { item.kind == .file }

    /// Every byte of the current version is on disk.
    public var isMaterialized: Bool {
        !isFile || item.size == 0 && cachedVersion == item.version.content
            || cachedVersion == item.version.content && present.covers(0, item.size)
    }

    /// `user.scopefs.state` without what only the queue knows (uploading).
    public var state: String {
        if let problem { return problem.hasPrefix("conflict") ? "conflict" : "error" }
        if dirty != 0 { return "dirty" }
        guard isFile else { return "materialized" }
        if isMaterialized { return pinned ? "pinned" : "materialized" }
        return present.isEmpty || cachedVersion != item.version.content ? "dataless" : "partial"
    }
}

/// Sorted, disjoint, non-adjacent byte ranges `[start, end)`.
public struct ByteRanges: Sendable, Equatable {
    public private(set) var ranges: [Range<Int64>] = []

    public init(_ ranges: [Range<Int64>] = []) {
        for range in ranges { insert(range) }
    }

    public var isEmpty: Bool { ranges.isEmpty }
    public var byteCount: Int64 { ranges.reduce(0) { $0 + ($1.upperBound - $1.lowerBound) } }

    public mutating func insert(_ range: Range<Int64>) {
        guard !range.isEmpty else { return }
        var merged = range
        var kept: [Range<Int64>] = []
        for existing in ranges {
            if existing.upperBound < merged.lowerBound || existing.lowerBound > merged.upperBound {
                kept.append(existing)
            } else {
                merged = min(existing.lowerBound, merged.lowerBound)..<max(existing.upperBound, merged.upperBound)
            }
        }
        kept.append(merged)
        ranges = kept.sorted { $0.lowerBound < $1.lowerBound }
    }

    /// Whether every byte of `[offset, end)` is in.
    public func covers(_ offset: Int64, _ end: Int64) -> Bool {
        guard offset < end else { return true }
        return ranges.contains { $0.lowerBound <= offset && $0.upperBound >= end }
    }

    /// The first byte of `[offset, end)` that is not in, if any.
    public func firstMissing(from offset: Int64, to end: Int64) -> Int64? {
        var position = offset
        for range in ranges where range.upperBound > position {
            if range.lowerBound > position { break }
            position = range.upperBound
            if position >= end { return nil }
        }
        return position < end ? position : nil
    }

    /// Where the run of missing bytes starting at `offset` ends (the next
    /// present byte, or `limit`).
    public func missingRunEnd(from offset: Int64, limit: Int64) -> Int64 {
        ranges.first { $0.lowerBound > offset }.map { min($0.lowerBound, limit) } ?? limit
    }

    /// As stored: start and end pairs, little-endian.
    public var encoded: [UInt8] {
        var bytes: [UInt8] = []
        for range in ranges {
            for value in [range.lowerBound, range.upperBound] {
                withUnsafeBytes(of: value.littleEndian) { bytes += $0 }
            }
        }
        return bytes
    }

    public init(encoded bytes: [UInt8]) {
        var values: [Int64] = []
        var index = 0
        while index + 8 <= bytes.count {
            var value: Int64 = 0
            for shift in 0..<8 { value |= Int64(bytes[index + shift]) << (8 * shift) }
            values.append(value)
            index += 8
        }
        var ranges: [Range<Int64>] = []
        var pair = 0
        while pair + 1 < values.count {
            if values[pair] < values[pair + 1] { ranges.append(values[pair]..<values[pair + 1]) }
            pair += 2
        }
        self.init(ranges)
    }
}
