import Foundation
import Glibc
import HostText

/// Previews of items (SPEC S50, docs/PROVIDERS.md "thumbnail"): an item's
/// PNG, asked of an extension that announces `thumbnails` and sent with an
/// upload when the saving app wrote one; `ThumbnailLimits` (HostText) is
/// what the mount and the host both check.

// Stores without previews: nothing to ask, nothing to send.
extension ExtensionCalls {
    public func thumbnail(_ id: String, size: Int, _ control: RequestControl) throws(ExtensionFailure) -> [UInt8]? {
        nil
    }

    public func create(_ template: ItemTemplate, contents: String?, thumbnail: String?, _ control: RequestControl)
        throws(ExtensionFailure) -> ExtensionItem
    {
        try create(template, contents: contents, control)
    }

    public func modify(
        _ id: String, baseVersion: ItemVersion, fields: ChangedFields, contents: String?, thumbnail: String?,
        _ control: RequestControl
    ) throws(ExtensionFailure) -> ExtensionItem {
        try modify(id, baseVersion: baseVersion, fields: fields, contents: contents, control)
    }
}

extension ExtensionHost {
    /// `thumbnail` (protocol 1.2): the staged PNG is taken out of the
    /// extension's reach and checked as a fetched file is (regular, one
    /// link, in the staging folder, its stated length), then for the byte
    /// limit and the PNG signature; a refused one is an event
    /// (`extension.thumbnailRefused`) and no preview.
    public func thumbnail(_ id: String, size: Int, _ control: RequestControl) throws(ExtensionFailure) -> [UInt8]? {
        guard case .running(let info) = state, info.capabilities.thumbnails else { return nil }
        guard let staged = guarded.withLock({ $0.staged }) else { return nil }
        let (value, _) = try call("thumbnail", ["id": .string(ReplicaID.wire(id)), "size": .int(Int64(size))], control)
        { late in
            if let path = late["path"]?.string { staged.discard(path) }
        }
        if value.isNull { return nil }
        guard let path = value["path"]?.string, let length = value["length"]?.int else {
            if let path = value["path"]?.string { staged.discard(path) }
            throw refuse("thumbnail", AnswerRefusal("not {path: string, length: integer} or null"))
        }
        guard length > 0, length <= Int64(ThumbnailLimits.bytes) else {
            staged.discard(path)
            emit(.thumbnailRefused(id: id, reason: "\(length) bytes, at most \(ThumbnailLimits.bytes)"))
            return nil
        }
        let file: FetchedFile
        do throws(AnswerRefusal) {
            file = try staged.take(FetchedFile(path: path, version: "", offset: 0, length: length))
        } catch {
            emit(.thumbnailRefused(id: id, reason: error.reason))
            return nil
        }
        defer { unlink(file.path) }
        guard let data = FileManager.default.contents(atPath: file.path) else { return nil }
        let bytes = [UInt8](data)
        if let problem = ThumbnailLimits.problem(bytes) {
            emit(.thumbnailRefused(id: id, reason: problem))
            return nil
        }
        return bytes
    }
}
