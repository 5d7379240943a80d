/// The methods of docs/PROVIDERS.md as `ExtensionCalls`: parameters to
/// JSON, answers checked and read back.
extension ExtensionHost {
    public func item(_ id: String, _ control: RequestControl) throws(ExtensionFailure) -> ExtensionItem {
        let (value, _) = try call("item", ["id": .string(ReplicaID.wire(id))], control)
        do throws(ItemRefusal) {
            return try ItemDecoding.item(value)
        } catch {
            throw refuse("item", AnswerRefusal("the item: \(error.reason)"))
        }
    }

    public func list(_ folder: String, page: String?, _ control: RequestControl) throws(ExtensionFailure) -> ItemPage {
        var params: [String: JSONValue] = ["id": .string(ReplicaID.wire(folder))]
        if let page { params["page"] = .string(page) }
        let (value, connection) = try call("list", params, control)
        var decoder = AnswerDecoder()
        let answer: (page: ItemPage, count: Int)
        do throws(AnswerRefusal) {
            answer = try decoder.page(value, folder: folder)
        } catch {
            throw refuse("list", error)
        }
        let pageSize = connection.info?.capabilities.maxPageSize ?? 1000
        guard answer.count <= pageSize else {
            let reason = "a list page of \(answer.count) items; its maxPageSize is \(pageSize)"
            connection.violation(reason, line: value.encoded)
            throw ExtensionFailure(.internalError, "list: \(reason)")
        }
        report("list", decoder.refused)
        return answer.page
    }

    public func currentAnchor(_ control: RequestControl) throws(ExtensionFailure) -> String {
        let (value, _) = try call("currentAnchor", [:], control)
        do throws(AnswerRefusal) {
            return try AnswerDecoder.anchor(value)
        } catch {
            throw refuse("currentAnchor", error)
        }
    }

    public func changes(since anchor: String, _ control: RequestControl) throws(ExtensionFailure) -> ItemChanges {
        let (value, _) = try call("changes", ["anchor": .string(anchor)], control)
        var decoder = AnswerDecoder()
        let changes: ItemChanges
        do throws(AnswerRefusal) {
            changes = try decoder.changes(value)
        } catch {
            throw refuse("changes", error)
        }
        report("changes", decoder.refused)
        return changes
    }

    public func fetch(_ id: String, version: String?, range: ByteRange?, _ control: RequestControl)
        throws(ExtensionFailure) -> FetchedFile
    {
        guard let staged = guarded.withLock({ $0.staged }) else {
            throw ExtensionFailure(.unreachable, "the extension of \(providerID) has not started")
        }
        var params: [String: JSONValue] = ["id": .string(ReplicaID.wire(id))]
        if let version { params["version"] = .string(version) }
        if let range {
            params["range"] = .object(["offset": .int(range.offset), "length": .int(range.length)])
        }
        // An answer nobody waits for any more: its file is nobody's.
        let (value, _) = try call("fetch", params, control) { late in
            if let path = late["path"]?.string { staged.discard(path) }
        }
        let answer: FetchedFile
        do throws(AnswerRefusal) {
            answer = try AnswerDecoder.fetched(value)
            if let version, answer.version != version {
                throw AnswerRefusal("version \(answer.version) where \(version) was asked for")
            }
            if let range, answer.offset > range.offset {
                throw AnswerRefusal("bytes from \(answer.offset) where \(range.offset) was asked for")
            }
        } catch {
            if let path = value["path"]?.string { staged.discard(path) }
            throw refuse("fetch", error)
        }
        do throws(AnswerRefusal) {
            return try staged.take(answer)
        } catch {
            emit(.stagedFileRefused(path: answer.path, reason: error.reason))
            throw ExtensionFailure(.internalError, "fetch: the staged file was refused: \(error.reason)")
        }
    }

    public func create(_ template: ItemTemplate, contents: String?, _ control: RequestControl)
        throws(ExtensionFailure) -> ExtensionItem
    {
        try create(template, contents: contents, thumbnail: nil, control)
    }

    public func create(_ template: ItemTemplate, contents: String?, thumbnail: String?, _ control: RequestControl)
        throws(ExtensionFailure) -> ExtensionItem
    {
        if let problem = ItemDecoding.nameProblem(template.name) {
            throw ExtensionFailure(.invalidName, "\(template.name): \(problem)")
        }
        var params: [String: JSONValue] = [
            "parent": .string(ReplicaID.wire(template.parent)), "name": .string(template.name),
            "kind": .string(template.kind.rawValue),
        ]
        if let mtime = template.mtime { params["mtime"] = .double(mtime) }
        if let mode = template.mode { params["mode"] = .int(Int64(mode)) }
        if let target = template.target { params["target"] = .string(target) }
        if let contents { params["contentsPath"] = .string(contents) }
        if let thumbnail { params["thumbnailPath"] = .string(thumbnail) }
        return try itemAnswer("create", params, control)
    }

    public func modify(
        _ id: String, baseVersion: ItemVersion, fields: ChangedFields, contents: String?, _ control: RequestControl
    ) throws(ExtensionFailure) -> ExtensionItem {
        try modify(id, baseVersion: baseVersion, fields: fields, contents: contents, thumbnail: nil, control)
    }

    public func modify(
        _ id: String, baseVersion: ItemVersion, fields: ChangedFields, contents: String?, thumbnail: String?,
        _ control: RequestControl
    ) throws(ExtensionFailure) -> ExtensionItem {
        if let name = fields.name, let problem = ItemDecoding.nameProblem(name) {
            throw ExtensionFailure(.invalidName, "\(name): \(problem)")
        }
        var params: [String: JSONValue] = ["id": .string(ReplicaID.wire(id)), "baseVersion": baseVersion.json]
        var changed: [String: JSONValue] = [:]
        if let name = fields.name { changed["name"] = .string(name) }
        if let parent = fields.parent { changed["parent"] = .string(ReplicaID.wire(parent)) }
        if let mtime = fields.mtime { changed["mtime"] = .double(mtime) }
        if let mode = fields.mode { changed["mode"] = .int(Int64(mode)) }
        if !changed.isEmpty { params["fields"] = .object(changed) }
        if let contents { params["contentsPath"] = .string(contents) }
        if let thumbnail { params["thumbnailPath"] = .string(thumbnail) }
        return try itemAnswer("modify", params, control)
    }

    public func delete(_ id: String, baseVersion: ItemVersion, _ control: RequestControl) throws(ExtensionFailure) {
        _ = try call("delete", ["id": .string(ReplicaID.wire(id)), "baseVersion": baseVersion.json], control)
    }

    private func itemAnswer(_ method: String, _ params: [String: JSONValue], _ control: RequestControl)
        throws(ExtensionFailure) -> ExtensionItem
    {
        let (value, _) = try call(method, params, control)
        do throws(ItemRefusal) {
            return try ItemDecoding.item(value)
        } catch {
            throw refuse(method, AnswerRefusal("the item: \(error.reason)"))
        }
    }
}

extension ItemVersion {
    var json: JSONValue { .object(["content": .string(content), "metadata": .string(metadata)]) }
}
