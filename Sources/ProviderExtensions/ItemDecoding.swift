/// The extension's answers read into the module's types, with the limits
/// of docs/PROVIDERS.md ("Items", "Limits"). One bad item is left out and
/// reported (`ItemRefusal`); an answer whose own shape is wrong is refused
/// whole (`AnswerRefusal`: the call fails with EIO).
enum ItemDecoding {
    static let idLimit = 2048
    static let nameLimit = 255
    /// Versions, anchors and page tokens.
    static let tokenLimit = 4096
    static let targetLimit = 4096

    static func item(_ value: JSONValue) throws(ItemRefusal) -> ExtensionItem {
        guard value.isObject else { throw ItemRefusal(id: nil, "not an object") }
        guard let id = value["id"]?.string else { throw ItemRefusal(id: nil, "no string id") }
        if let problem = idProblem(id) { throw ItemRefusal(id: nil, "id: \(problem)") }
        let isRoot = id == ExtensionItem.rootID
        let parent: String?
        switch value["parent"] {
        case .string(let text)?:
            if let problem = idProblem(text) { throw ItemRefusal(id: id, "parent: \(problem)") }
            guard !isRoot else { throw ItemRefusal(id: id, "the root has a parent") }
            parent = text
        case .null?, nil:
            guard isRoot else { throw ItemRefusal(id: id, "no parent (only the root has none)") }
            parent = nil
        default: throw ItemRefusal(id: id, "parent is not a string or null")
        }
        guard let name = value["name"]?.string else { throw ItemRefusal(id: id, "no string name") }
        if !isRoot, let problem = nameProblem(name) { throw ItemRefusal(id: id, "name: \(problem)") }
        guard let kind = value["kind"]?.string.flatMap(ItemKind.init(rawValue:)) else {
            throw ItemRefusal(id: id, "kind is not file, folder or symlink")
        }
        guard let size = value["size"]?.int, size >= 0 else { throw ItemRefusal(id: id, "size is not an integer ≥ 0") }
        guard let mtime = value["mtime"]?.number else { throw ItemRefusal(id: id, "mtime is not a number") }
        guard let mode = value["mode"]?.int, (0...0o7777).contains(mode) else {
            throw ItemRefusal(id: id, "mode is not an integer from 0 to 0o7777")
        }
        let version = try version(value["version"], of: id)
        var target: String?
        if kind == .symlink {
            guard let text = value["target"]?.string, !text.isEmpty, text.utf8.count <= targetLimit,
                !text.utf8.contains(0)
            else { throw ItemRefusal(id: id, "a symlink without a usable target") }
            target = text
        }
        // A preview exists (SPEC S50): anything but a boolean says nothing.
        let thumbnail = kind == .file ? value["thumbnail"]?.bool : false
        return ExtensionItem(
            id: ReplicaID.kept(id), parent: parent.map(ReplicaID.kept), name: isRoot ? "" : name, kind: kind,
            size: kind == .folder ? 0 : size,
            mtime: mtime, mode: ReplicaFolder.permissions(UInt32(mode)), version: version, target: target,
            thumbnail: thumbnail)
    }

    private static func version(_ value: JSONValue?, of id: String) throws(ItemRefusal) -> ItemVersion {
        guard let content = value?["content"]?.string, let metadata = value?["metadata"]?.string else {
            throw ItemRefusal(id: id, "version is not {content: string, metadata: string}")
        }
        guard content.utf8.count <= tokenLimit, metadata.utf8.count <= tokenLimit else {
            throw ItemRefusal(id: id, "a version longer than \(tokenLimit) bytes")
        }
        return ItemVersion(content: content, metadata: metadata)
    }

    /// Why `id` is not a usable id, or nil. NUL is refused too: it is
    /// what a lone surrogate escape (not UTF-8) decodes to, and no store
    /// names an item with it.
    static func idProblem(_ id: String) -> String? {
        let bytes = id.utf8
        if bytes.isEmpty || bytes.count > idLimit { return "not 1 to \(idLimit) bytes (\(bytes.count))" }
        if bytes.contains(0) { return "holds NUL or a character that is not UTF-8" }
        return nil
    }

    /// docs/PROVIDERS.md, "Names": why `name` is not one, or nil.
    static func nameProblem(_ name: String) -> String? {
        let bytes = name.utf8
        if bytes.isEmpty { return "empty" }
        if bytes.count > nameLimit { return "longer than \(nameLimit) bytes" }
        if name == "." || name == ".." { return "'\(name)' is not a name" }
        if bytes.contains(UInt8(ascii: "/")) { return "holds '/'" }
        if bytes.contains(0) { return "holds NUL or a character that is not UTF-8" }
        return nil
    }

    static func token(_ value: JSONValue?, _ what: String) throws(AnswerRefusal) -> String {
        guard let text = value?.string else { throw AnswerRefusal("\(what) is not a string") }
        guard text.utf8.count <= tokenLimit else { throw AnswerRefusal("\(what) is longer than \(tokenLimit) bytes") }
        return text
    }
}

struct ItemRefusal: Error {
    var id: String?
    var reason: String
    init(id: String?, _ reason: String) {
        self.id = id
        self.reason = reason
    }
}

struct AnswerRefusal: Error {
    var reason: String
    init(_ reason: String) { self.reason = reason }
}

/// The answers of `list`, `changes`, `currentAnchor` and `fetch`. Items
/// left out are collected in `refused` for the host to report.
struct AnswerDecoder {
    var refused: [ItemRefusal] = []

    mutating func items(_ value: JSONValue?, _ what: String) throws(AnswerRefusal) -> [ExtensionItem] {
        guard let values = value?.array else { throw AnswerRefusal("\(what) is not an array") }
        var items: [ExtensionItem] = []
        items.reserveCapacity(values.count)
        for value in values {
            do throws(ItemRefusal) {
                items.append(try ItemDecoding.item(value))
            } catch {
                refused.append(error)
            }
        }
        return items
    }

    /// `list`'s answer; `pageCount` is the number of items the page held
    /// before any was left out (the page size limit counts them all).
    mutating func page(_ value: JSONValue, folder: String) throws(AnswerRefusal) -> (page: ItemPage, count: Int) {
        guard value.isObject else { throw AnswerRefusal("not an object") }
        let count = value["items"]?.array?.count ?? 0
        var items = try self.items(value["items"], "items")
        items.removeAll { item in
            guard item.parent != folder else { return false }
            refused.append(ItemRefusal(id: item.id, "its parent is not the listed folder"))
            return true
        }
        var next: String?
        if let token = value["nextPage"], !token.isNull { next = try ItemDecoding.token(token, "nextPage") }
        return (ItemPage(items: items, nextPage: next), count)
    }

    mutating func changes(_ value: JSONValue) throws(AnswerRefusal) -> ItemChanges {
        guard value.isObject else { throw AnswerRefusal("not an object") }
        let updated = try items(value["updated"], "updated")
        guard let deletedValues = value["deleted"]?.array else { throw AnswerRefusal("deleted is not an array") }
        var deleted: [String] = []
        for entry in deletedValues {
            guard let id = entry.string else {
                refused.append(ItemRefusal(id: nil, "a deleted id that is not a string"))
                continue
            }
            if let problem = ItemDecoding.idProblem(id) {
                refused.append(ItemRefusal(id: nil, "deleted id: \(problem)"))
                continue
            }
            deleted.append(ReplicaID.kept(id))
        }
        let anchor = try ItemDecoding.token(value["anchor"], "anchor")
        guard let more = value["more"].map({ $0.isNull ? false : $0.bool }) ?? false else {
            throw AnswerRefusal("more is not a boolean")
        }
        return ItemChanges(updated: updated, deleted: deleted, anchor: anchor, more: more)
    }

    static func anchor(_ value: JSONValue) throws(AnswerRefusal) -> String {
        guard value.isObject else { throw AnswerRefusal("not an object") }
        return try ItemDecoding.token(value["anchor"], "anchor")
    }

    /// `fetch`'s answer, before its file is checked.
    static func fetched(_ value: JSONValue) throws(AnswerRefusal) -> FetchedFile {
        guard value.isObject else { throw AnswerRefusal("not an object") }
        guard let path = value["path"]?.string else { throw AnswerRefusal("path is not a string") }
        let version = try ItemDecoding.token(value["version"], "version")
        guard let offset = value["offset"]?.int, offset >= 0, let length = value["length"]?.int, length >= 0 else {
            throw AnswerRefusal("offset and length are not integers ≥ 0")
        }
        return FetchedFile(path: path, version: version, offset: offset, length: length)
    }
}
