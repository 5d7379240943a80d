import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The promised item resource values that make sense on ScopeFS (SPEC S50,
/// Apple's `getPromisedItemResourceValue`): what a document browser shows of
/// an item whose content may not be local.
public enum PromisedItemKey: Hashable, Sendable, CaseIterable {
    case name
    case fileSize
    case contentModificationDate
    case attributeModificationDate
    /// Apple's `ubiquitousItemDownloadingStatus`, from `user.scopefs.state`.
    case downloadingStatus
    /// Apple's `thumbnailDictionary`: the preview, a PNG
    /// (`user.scopefs.thumbnail`).
    case thumbnail
}

public struct PromisedItemValues: Sendable, Equatable {
    /// Apple's `URLUbiquitousItemDownloadingStatus`.
    public enum DownloadingStatus: String, Sendable {
        /// Every byte of the current version is local.
        case current
        /// Local, with changes not uploaded yet (or a conflict).
        case downloaded
        /// Dataless or partial: reading it would download.
        case notDownloaded = "not-downloaded"
    }

    public var name: String?
    public var fileSize: Int64?
    public var contentModificationDate: Date?
    public var attributeModificationDate: Date?
    public var downloadingStatus: DownloadingStatus?
    /// `user.scopefs.state` as the daemon said it (dataless, partial,
    /// materialized, pinned, dirty, uploading, conflict, error).
    public var state: String?
    /// The preview's PNG bytes; nil when the item has none.
    public var thumbnail: [UInt8]?
}

extension URL {
    /// Apple's `promisedItemResourceValues(forKeys:)` on ScopeFS: the values
    /// come from `stat` and the item's attributes alone, so asking never
    /// downloads the document (not even for an app whose policy is never
    /// to download) and needs no security scope (SPEC S50). An item of the
    /// app's container is always `current`.
    ///
    /// - Throws: `ScopeFSError` with the errno of `stat` or `getxattr`
    ///   (ENOENT for an item the app cannot see).
    public func promisedItemResourceValues(forKeys keys: Set<PromisedItemKey>) throws(ScopeFSError)
        -> PromisedItemValues
    {
        let path = try scopeFSPath(for: .inspectReference)
        var values = PromisedItemValues()
        var info = stat()
        let status = HostPathText.withCString(path) { stat($0, &info) }
        guard status == 0 else { throw ScopeFSError(errno: errno, operation: .inspectReference, path: path) }
        if keys.contains(.name) { values.name = lastPathComponent }
        if keys.contains(.fileSize) { values.fileSize = Int64(info.st_size) }
        if keys.contains(.contentModificationDate) { values.contentModificationDate = Self.date(info.st_mtim) }
        if keys.contains(.attributeModificationDate) { values.attributeModificationDate = Self.date(info.st_ctim) }
        if keys.contains(.downloadingStatus) {
            let state = try Self.optionalAttribute("user.scopefs.state", of: path).map {
                String(decoding: $0, as: UTF8.self)
            }
            values.state = state ?? "materialized"
            values.downloadingStatus = Self.downloadingStatus(values.state!)
        }
        if keys.contains(.thumbnail), info.st_mode & S_IFMT != S_IFDIR {
            values.thumbnail = try Self.optionalAttribute(PromisedItemValues.thumbnailAttribute, of: path)
        }
        return values
    }

    private static func date(_ time: timespec) -> Date {
        Date(timeIntervalSince1970: Double(time.tv_sec) + Double(time.tv_nsec) / 1e9)
    }

    static func downloadingStatus(_ state: String) -> PromisedItemValues.DownloadingStatus {
        switch state {
        case "materialized", "pinned": .current
        case "dirty", "uploading", "conflict", "error": .downloaded
        default: .notDownloaded
        }
    }

    /// An attribute's bytes, or nil when the item has none (ENODATA) or the
    /// file system has no such attribute (ENOTSUP, outside provider views).
    private static func optionalAttribute(_ name: String, of path: String) throws(ScopeFSError) -> [UInt8]? {
        do {
            return try readAttributeBytes(name, of: path, for: .inspectReference)
        } catch  where error.errno == ENODATA || error.errno == ENOTSUP {
            return nil
        }
    }
}

extension PromisedItemValues {
    static let thumbnailAttribute = "user.scopefs.thumbnail"
}
