import Foundation

/// An item's identity, chosen by the extension; the root's is `"root"`.
public typealias ItemIdentifier = String

extension ItemIdentifier {
    public static let rootContainer: ItemIdentifier = "root"
}

/// The two halves of an item's version, compared for equality only.
public struct ItemVersion: Sendable, Equatable, Hashable {
    public var contentVersion: String
    public var metadataVersion: String
    public init(contentVersion: String, metadataVersion: String) {
        self.contentVersion = contentVersion
        self.metadataVersion = metadataVersion
    }
}

public enum ItemKind: String, Sendable, CaseIterable {
    case file, folder, symlink
}

/// One file, folder or symlink (docs/PROVIDERS.md "Items").
public struct Item: Sendable, Equatable {
    public var identifier: ItemIdentifier
    public var parentIdentifier: ItemIdentifier?
    public var filename: String
    public var kind: ItemKind
    public var size: Int64
    /// Seconds since the Unix epoch.
    public var modificationTime: Double
    /// Permission bits only (0 to 0o7777).
    public var mode: Int
    public var itemVersion: ItemVersion
    /// Symlinks only: the target as stored.
    public var symlinkTarget: String?
    /// Files only (protocol 1.2): true, the item has a preview
    /// (`fetchThumbnail`); false, it has none and the daemon never asks;
    /// nil says nothing (the daemon may ask).
    public var hasThumbnail: Bool?

    public init(
        identifier: ItemIdentifier, parentIdentifier: ItemIdentifier?, filename: String, kind: ItemKind,
        size: Int64, modificationTime: Double, mode: Int, itemVersion: ItemVersion, symlinkTarget: String? = nil,
        hasThumbnail: Bool? = nil
    ) {
        self.identifier = identifier
        self.parentIdentifier = parentIdentifier
        self.filename = filename
        self.kind = kind
        self.size = size
        self.modificationTime = modificationTime
        self.mode = mode
        self.itemVersion = itemVersion
        self.symlinkTarget = symlinkTarget
        self.hasThumbnail = hasThumbnail
    }

    public var json: JSONValue {
        var item: [String: JSONValue] = [
            "id": .string(identifier),
            "parent": parentIdentifier.map { .string($0) } ?? .null,
            "name": .string(filename),
            "kind": .string(kind.rawValue),
            "size": .int(size),
            "mtime": .number(modificationTime),
            "mode": .int(Int64(mode)),
            "version": .object([
                "content": .string(itemVersion.contentVersion), "metadata": .string(itemVersion.metadataVersion),
            ]),
        ]
        if kind == .symlink { item["target"] = .string(symlinkTarget ?? "") }
        if kind == .file, let hasThumbnail { item["thumbnail"] = .bool(hasThumbnail) }
        return .object(item)
    }
}

/// Why `name` is not a valid item name (docs/PROVIDERS.md "Names"), or nil.
public func nameProblem(_ name: String) -> String? {
    if name.isEmpty { return "a name is a non-empty string" }
    if name == "." || name == ".." { return "a name is not '.' or '..'" }
    if name.utf8.contains(UInt8(ascii: "/")) || name.utf8.contains(0) { return "a name holds no '/' and no NUL" }
    if name.utf8.count > 255 { return "a name is at most 255 bytes" }
    return nil
}

/// What `initialize` announces (docs/PROVIDERS.md "Capabilities").
public struct Capabilities: Sendable {
    public enum ChangeDelivery: String, Sendable { case notify, poll, none }
    public var changes: ChangeDelivery = .none
    public var ranges = false
    public var create = false
    public var modify = false
    public var delete = false
    public var rename = false
    public var conditionalWrites = false
    public var maxPageSize = 100
    public var settableFields: [String]? = nil
    public var symlinks = false
    public var renameKeepsId = true
    /// Protocol 1.2: the extension serves previews (`fetchThumbnail`).
    public var thumbnails = false

    public init() {}

    var json: JSONValue {
        var object: [String: JSONValue] = [
            "changes": .string(changes.rawValue), "ranges": .bool(ranges), "create": .bool(create),
            "modify": .bool(modify), "delete": .bool(delete), "rename": .bool(rename),
            "conditionalWrites": .bool(conditionalWrites), "maxPageSize": .int(Int64(maxPageSize)),
            "symlinks": .bool(symlinks), "renameKeepsId": .bool(renameKeepsId), "thumbnails": .bool(thumbnails),
        ]
        if let settableFields { object["settableFields"] = .array(settableFields.map { .string($0) }) }
        return .object(object)
    }
}

/// One page of a folder's children; `nextPage` nil after the last.
public struct ItemPage: Sendable {
    public var items: [Item]
    public var nextPage: String?
    public init(items: [Item], nextPage: String?) {
        self.items = items
        self.nextPage = nextPage
    }
}

/// What changed since an anchor.
public struct ItemChanges: Sendable {
    public var updated: [Item]
    public var deleted: [ItemIdentifier]
    public var anchor: String
    public var more: Bool
    public init(updated: [Item], deleted: [ItemIdentifier], anchor: String, more: Bool = false) {
        self.updated = updated
        self.deleted = deleted
        self.anchor = anchor
        self.more = more
    }
}

/// Bytes `offset ..< offset + length` of a file.
public struct ByteRange: Sendable, Equatable {
    public var offset: Int64
    public var length: Int64
    public init(offset: Int64, length: Int64) {
        self.offset = offset
        self.length = length
    }
}

/// `fetch`'s answer: a new file in the staging folder holding `range`.
public struct FetchedContents: Sendable {
    public var url: URL
    public var contentVersion: String
    public var offset: Int64
    public var length: Int64
    public init(url: URL, contentVersion: String, offset: Int64, length: Int64) {
        self.url = url
        self.contentVersion = contentVersion
        self.offset = offset
        self.length = length
    }
}

/// `thumbnail`'s answer (protocol 1.2): a PNG of at most 64 KiB in the
/// staging folder (`RequestContext.makeStagingFile`).
public struct StagedThumbnail: Sendable {
    public var url: URL
    public var length: Int64
    public init(url: URL, length: Int64) {
        self.url = url
        self.length = length
    }
}

/// `create`'s description of the new item (Apple's "item template").
public struct ItemTemplate: Sendable {
    public var parentIdentifier: ItemIdentifier
    public var filename: String
    public var kind: ItemKind
    public var modificationTime: Double?
    public var mode: Int?
    public var symlinkTarget: String?
}

/// `modify`'s fields; nil ones are unchanged (Apple's `changedFields`).
public struct ChangedFields: Sendable, Equatable {
    public var filename: String?
    public var parentIdentifier: ItemIdentifier?
    public var modificationTime: Double?
    public var mode: Int?
    public var isEmpty: Bool { filename == nil && parentIdentifier == nil && modificationTime == nil && mode == nil }
    public init(
        filename: String? = nil, parentIdentifier: ItemIdentifier? = nil, modificationTime: Double? = nil,
        mode: Int? = nil
    ) {
        self.filename = filename
        self.parentIdentifier = parentIdentifier
        self.modificationTime = modificationTime
        self.mode = mode
    }
}
