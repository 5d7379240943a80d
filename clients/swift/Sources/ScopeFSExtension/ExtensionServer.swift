import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The protocol's stdio loop (docs/PROVIDERS.md "Transport", "Life cycle"):
/// one JSON-RPC 2.0 message per line on stdin and stdout, lines of at most
/// 1 MiB. The reader thread parses lines and starts a task per request, so
/// requests run concurrently and are answered in any order; `initialize`
/// and `shutdown` run on the reader itself, since nothing may overtake them.
public final class ExtensionServer: @unchecked Sendable {
    public static let protocolVersion = "1.2"
    /// Longest line, both ways, without its "\n".
    public static let maxLineBytes = 1 << 20
    static let maxPageSize = 1000
    /// At `shutdown`, requests in flight get this long to finish, then as
    /// long again once cancelled; the daemon allows 5 s in all.
    static let shutdownGrace: TimeInterval = 2

    let implementation: any ReplicatedExtension
    private let output: Int32
    private let input: Int32
    private let lock = NSLock()
    private let writeLock = NSLock()
    private var inFlight: [JSONValue: RequestContext] = [:]
    private var initialized = false
    private var shutDown = false
    private var pageSizeLimit = ExtensionServer.maxPageSize
    private var staging = URL(fileURLWithPath: "/nonexistent")

    var stagingDirectory: URL { lock.withLock { staging } }

    init(_ implementation: any ReplicatedExtension, input: Int32, output: Int32) {
        self.implementation = implementation
        self.input = input
        self.output = output
    }

    /// Serves `implementation` on stdin/stdout until `exit`, then exits the
    /// process: status 0 after `shutdown`, 1 otherwise (also at end of
    /// input: the daemon is gone). Stdout belongs to the protocol, so
    /// anything else printed there goes to stderr from here on.
    public static func run(_ implementation: any ReplicatedExtension) -> Never {
        let protocolOutput = dup(STDOUT_FILENO)
        dup2(STDERR_FILENO, STDOUT_FILENO)
        let status = ExtensionServer(implementation, input: STDIN_FILENO, output: protocolOutput).serve()
        exit(status)
    }

    // MARK: Output

    private static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        return encoder
    }()

    private func send(_ message: [String: JSONValue]) {
        guard var line = try? Self.encoder.encode(JSONValue.object(message)) else { return }
        if line.count > Self.maxLineBytes {
            // Never send what the daemon must refuse: an answer becomes an error.
            guard let id = message["id"], message["method"] == nil else { return }
            let error = ExtensionError(.tooLarge, "answer longer than 1 MiB").json
            guard
                let replacement = try? Self.encoder.encode(
                    JSONValue.object(["jsonrpc": "2.0", "id": id, "error": error]))
            else { return }
            guard replacement.count <= Self.maxLineBytes else { return }  // an id that alone fills the line
            line = replacement
        }
        line.append(UInt8(ascii: "\n"))
        writeLock.withLock {
            line.withUnsafeBytes { buffer in
                var offset = 0
                while offset < buffer.count {
                    let written = write(output, buffer.baseAddress! + offset, buffer.count - offset)
                    if written < 0 {
                        if errno == EINTR { continue }
                        return  // the daemon is gone; end of input follows
                    }
                    offset += written
                }
            }
        }
    }

    func notify(_ method: String, _ params: [String: JSONValue]) {
        send(["jsonrpc": "2.0", "method": .string(method), "params": .object(params)])
    }

    private func answer(_ id: JSONValue, result: JSONValue) {
        send(["jsonrpc": "2.0", "id": id, "result": result])
    }

    private func answer(_ id: JSONValue, error: ExtensionError) {
        send(["jsonrpc": "2.0", "id": id, "error": error.json])
    }

    // MARK: Input

    /// Runs until `exit` or end of input; the process's exit status.
    func serve() -> Int32 {
        var pending: [UInt8] = []
        var discarding = false  // inside a line longer than the limit
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(input, $0.baseAddress!, $0.count) }
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { return 1 }  // end of input without `exit`: the daemon is gone
            var start = 0
            for index in 0..<count where chunk[index] == UInt8(ascii: "\n") {
                if discarding {
                    discarding = false
                } else if pending.count + (index - start) > Self.maxLineBytes {
                    answer(.null, error: ExtensionError(.parseError, "line longer than 1 MiB"))
                    pending.removeAll(keepingCapacity: true)
                } else {
                    pending.append(contentsOf: chunk[start..<index])
                    let status = handleLine(pending)
                    pending.removeAll(keepingCapacity: true)
                    if let status { return status }
                }
                start = index + 1
            }
            if !discarding {
                pending.append(contentsOf: chunk[start..<count])
                if pending.count > Self.maxLineBytes {
                    answer(.null, error: ExtensionError(.parseError, "line longer than 1 MiB"))
                    pending.removeAll()
                    discarding = true
                }
            }
        }
    }

    private func handleLine(_ line: [UInt8]) -> Int32? {
        if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) { return nil }
        guard String(validating: line, as: UTF8.self) != nil,
            let message = try? JSONDecoder().decode(JSONValue.self, from: Data(line))
        else {
            answer(.null, error: ExtensionError(.parseError, "not a JSON object"))
            return nil
        }
        return dispatch(message)
    }

    private func dispatch(_ message: JSONValue) -> Int32? {
        guard case .object(let object) = message, object["jsonrpc"] == .string("2.0") else {
            answer(
                usableID(message["id"]) ?? .null, error: ExtensionError(.invalidRequest, "not a JSON-RPC 2.0 message"))
            return nil
        }
        guard let methodValue = object["method"] else { return nil }  // a response: none expected in 1.0
        let id = object["id"]
        guard case .string(let method) = methodValue, id == nil || usableID(id) != nil else {
            answer(usableID(id) ?? .null, error: ExtensionError(.invalidRequest, "bad method or id"))
            return nil
        }
        let params = object["params"] ?? .object([:])
        guard let id else { return notification(method, params) }
        guard case .object(let parameters) = params else {
            answer(id, error: .invalidParams("params is an object"))
            return nil
        }
        let (isInitialized, isShutDown) = lock.withLock { (initialized, shutDown) }
        guard Self.methods.contains(method) else {
            answer(id, error: ExtensionError(.methodNotFound, "no method '\(method)'"))
            return nil
        }
        // After `shutdown`, everything but `shutdown` is -32600, even when
        // `initialize` never succeeded (PROVIDERS.md "Life cycle").
        if isShutDown && method != "shutdown" {
            answer(id, error: ExtensionError(.invalidRequest, "shut down"))
            return nil
        }
        if method != "initialize" && method != "shutdown" && !isInitialized {
            answer(id, error: ExtensionError(.notInitialized, "initialize first"))
            return nil
        }
        let request = RequestContext(id: id, method: method, server: self)
        lock.withLock { inFlight[id] = request }
        let checkedParams = Params(parameters)
        if method == "initialize" || method == "shutdown" {
            // In order: nothing overtakes them, so the reader waits here.
            let done = DispatchSemaphore(value: 0)
            Task {
                await self.execute(request, checkedParams)
                done.signal()
            }
            done.wait()
        } else {
            Task { await self.execute(request, checkedParams) }
        }
        return nil
    }

    private func usableID(_ id: JSONValue?) -> JSONValue? {
        switch id {
        case .string, .int: return id
        default: return nil
        }
    }

    private func notification(_ method: String, _ params: JSONValue) -> Int32? {
        switch method {
        case "exit":
            return lock.withLock { shutDown } ? 0 : 1
        case "$/cancel":
            if let id = params["id"] { lock.withLock { inFlight[id] }?.cancel() }
            return nil
        default:
            return nil  // unknown notifications are ignored
        }
    }

    private func execute(_ request: RequestContext, _ params: Params) async {
        do {
            try request.checkCancelled()  // cancelled before it started
            // A request cancelled after it finished still gets its result
            // (allowed): answering `cancelled` would orphan a staged file.
            answer(request.id, result: try await handle(request, params))
        } catch let error as ExtensionError {
            answer(request.id, error: error)
        } catch {
            FileHandle.standardError.write(Data("\(request.method): \(error)\n".utf8))
            answer(request.id, error: ExtensionError(.internalError, "\(error)"))
        }
        lock.withLock { _ = inFlight.removeValue(forKey: request.id) }
    }

    // MARK: Methods

    static let methods: Set<String> = [
        "initialize", "shutdown", "item", "list", "currentAnchor", "changes", "fetch", "create", "modify", "delete",
        "thumbnail",
    ]

    private func handle(_ request: RequestContext, _ params: Params) async throws -> JSONValue {
        let ext = implementation
        switch request.method {
        case "initialize":
            return try await initialize(params)
        case "shutdown":
            await shutdown(request)
            return .object([:])
        case "item":
            return try await ext.item(for: params.string("id"), request: request).json
        case "list":
            let container = try params.string("id")
            let page = try params.optionalString("page")
            let limit = lock.withLock { pageSizeLimit }
            let pageSize = try params.optionalInt("pageSize").map(Int.init) ?? limit
            guard pageSize >= 1 else { throw ExtensionError.invalidParams("pageSize is at least 1") }
            let answer = try await ext.enumerateItems(
                in: container, page: page, pageSize: min(pageSize, limit), request: request)
            return .object([
                "items": .array(answer.items.map(\.json)),
                "nextPage": answer.nextPage.map { .string($0) } ?? .null,
            ])
        case "currentAnchor":
            return .object(["anchor": .string(try await ext.currentSyncAnchor(request: request))])
        case "changes":
            let changes = try await ext.enumerateChanges(since: params.string("anchor"), request: request)
            return .object([
                "updated": .array(changes.updated.map(\.json)), "deleted": .array(changes.deleted.map { .string($0) }),
                "anchor": .string(changes.anchor), "more": .bool(changes.more),
            ])
        case "fetch":
            return try await fetch(params, request)
        case "create":
            return try await create(params, request)
        case "modify":
            return try await modify(params, request)
        case "thumbnail":
            let size = try params.nonNegative("size")
            guard size >= 1 else { throw ExtensionError.invalidParams("size is at least 1") }
            let found = try await ext.fetchThumbnail(for: params.string("id"), size: Int(size), request: request)
            return found.map { .object(["path": .string($0.url.path), "length": .int($0.length)]) } ?? .null
        case "delete":
            try await ext.deleteItem(
                identifier: params.string("id"), baseVersion: params.version("baseVersion"), request: request)
            return .object([:])
        default:
            throw ExtensionError(.methodNotFound, request.method)
        }
    }

    private func initialize(_ params: Params) async throws -> JSONValue {
        let offered = try params.string("protocolVersion")
        let providerID = try params.string("providerId")
        let stagingPath = try params.string("stagingDirectory")
        var options: [String: String] = [:]
        for (key, value) in try params.optionalObject("options") ?? [:] {
            guard case .string(let text) = value else {
                throw ExtensionError.invalidParams("option '\(key)' is a string in protocol 1.0")
            }
            options[key] = text
        }
        let offeredVersion = try Self.parseVersion(offered)
        let ownVersion = try Self.parseVersion(Self.protocolVersion)
        guard offeredVersion.major == ownVersion.major else {
            throw ExtensionError(
                .unsupportedVersion, "this extension speaks \(Self.protocolVersion)",
                data: .object(["supported": .array([.string(Self.protocolVersion)])]))
        }
        // Same major: the lower minor of the two.
        let chosen = offeredVersion.minor < ownVersion.minor ? offered : Self.protocolVersion
        let stagingURL = URL(fileURLWithPath: stagingPath)
        lock.withLock { staging = stagingURL }
        let capabilities = try await implementation.initialize(
            providerIdentifier: providerID, stagingDirectory: stagingURL, options: options,
            connection: ExtensionConnection(server: self))
        lock.withLock {
            pageSizeLimit = max(1, min(Self.maxPageSize, capabilities.maxPageSize))
            initialized = true
        }
        return .object([
            "protocolVersion": .string(chosen), "name": .string(implementation.name),
            "version": .string(implementation.version), "capabilities": capabilities.json,
        ])
    }

    static func parseVersion(_ text: String) throws -> (major: Int, minor: Int) {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, parts.allSatisfy({ !$0.isEmpty && $0.allSatisfy(\.isASCII) }),
            let major = Int(parts[0]), let minor = Int(parts[1]), major >= 0, minor >= 0
        else { throw ExtensionError.invalidParams("protocolVersion '\(text)' is not MAJOR.MINOR") }
        return (major, minor)
    }

    /// Every request in flight is answered before `shutdown`'s own answer:
    /// finished if it can within the grace time, else cancelled.
    private func shutdown(_ request: RequestContext) async {
        let wasInitialized = lock.withLock {
            shutDown = true
            return initialized
        }
        if !(await waitForOthers(than: request)) {
            lock.withLock { inFlight.values.filter { $0 !== request } }.forEach { $0.cancel() }
            _ = await waitForOthers(than: request)
        }
        if wasInitialized { await implementation.shutdown() }
    }

    private func waitForOthers(than request: RequestContext) async -> Bool {
        let deadline = Date().addingTimeInterval(Self.shutdownGrace)
        while Date() < deadline {
            if lock.withLock({ inFlight.values.allSatisfy { $0 === request } }) { return true }
            try? await Task.sleep(nanoseconds: 10_000_000)
        }
        return false
    }

    private func fetch(_ params: Params, _ request: RequestContext) async throws -> JSONValue {
        let id = try params.string("id")
        let version = try params.optionalString("version")
        var range: ByteRange?
        if let object = try params.optionalObject("range") {
            let inner = Params(object)
            range = ByteRange(offset: try inner.nonNegative("offset"), length: try inner.nonNegative("length"))
        }
        let fetched = try await implementation.fetchContents(for: id, version: version, range: range, request: request)
        return .object([
            "path": .string(fetched.url.path), "version": .string(fetched.contentVersion),
            "offset": .int(fetched.offset), "length": .int(fetched.length),
        ])
    }

    private func create(_ params: Params, _ request: RequestContext) async throws -> JSONValue {
        let parent = try params.string("parent")
        let name = try params.string("name")
        guard let kind = ItemKind(rawValue: try params.string("kind")) else {
            throw ExtensionError.invalidParams("kind is file, folder or symlink")
        }
        if let problem = nameProblem(name) { throw ExtensionError(.invalidName, problem) }
        let template = ItemTemplate(
            parentIdentifier: parent, filename: name, kind: kind, modificationTime: try params.optionalNumber("mtime"),
            mode: try params.optionalMode("mode"),
            symlinkTarget: kind == .symlink ? try params.string("target") : try params.optionalString("target"))
        let contents = try params.optionalString("contentsPath").map { URL(fileURLWithPath: $0) }
        let item = try await implementation.createItem(basedOn: template, contents: contents, request: request)
        try await saveThumbnail(of: item, params, request)
        return item.json
    }

    private func modify(_ params: Params, _ request: RequestContext) async throws -> JSONValue {
        let id = try params.string("id")
        let base = try params.version("baseVersion")
        let fieldObject = try params.optionalObject("fields") ?? [:]
        let unknown = Set(fieldObject.keys).subtracting(["name", "parent", "mtime", "mode"])
        guard unknown.isEmpty else { throw ExtensionError.invalidParams("unknown fields \(unknown.sorted())") }
        let fields = Params(fieldObject)
        let changed = ChangedFields(
            filename: try fields.optionalString("name"), parentIdentifier: try fields.optionalString("parent"),
            modificationTime: try fields.optionalNumber("mtime"), mode: try fields.optionalMode("mode"))
        if let name = changed.filename, let problem = nameProblem(name) {
            throw ExtensionError(.invalidName, problem)
        }
        let contents = try params.optionalString("contentsPath").map { URL(fileURLWithPath: $0) }
        let item = try await implementation.modifyItem(
            id, baseVersion: base, changedFields: changed, contents: contents, request: request)
        try await saveThumbnail(of: item, params, request)
        return item.json
    }

    /// `thumbnailPath` of `create` and `modify` (protocol 1.2). The
    /// document is stored: a preview that cannot be kept must not turn its
    /// upload into an error (the daemon would send it again).
    private func saveThumbnail(of item: Item, _ params: Params, _ request: RequestContext) async throws {
        guard let path = try params.optionalString("thumbnailPath"), item.kind == .file else { return }
        do {
            try await implementation.saveThumbnail(
                for: item.identifier, from: URL(fileURLWithPath: path), request: request)
        } catch {
            ExtensionConnection(server: self).log(
                .warning, "the preview of '\(item.identifier)' was not kept: \(error)")
        }
    }
}

/// A request's params, read with the protocol's types (-32602 otherwise).
struct Params: Sendable {
    let values: [String: JSONValue]
    init(_ values: [String: JSONValue]) { self.values = values }

    private func present(_ key: String) -> JSONValue? {
        guard let value = values[key], value != .null else { return nil }
        return value
    }

    func string(_ key: String) throws -> String {
        guard let value = try optionalString(key) else {
            throw ExtensionError.invalidParams("missing parameter '\(key)'")
        }
        return value
    }

    func optionalString(_ key: String) throws -> String? {
        guard let value = present(key) else { return nil }
        guard case .string(let text) = value else { throw ExtensionError.invalidParams("'\(key)' is a string") }
        return text
    }

    func optionalObject(_ key: String) throws -> [String: JSONValue]? {
        guard let value = present(key) else { return nil }
        guard case .object(let object) = value else { throw ExtensionError.invalidParams("'\(key)' is an object") }
        return object
    }

    func optionalInt(_ key: String) throws -> Int64? {
        guard let value = present(key) else { return nil }
        guard case .int(let number) = value else { throw ExtensionError.invalidParams("'\(key)' is an integer") }
        return number
    }

    func nonNegative(_ key: String) throws -> Int64 {
        guard let number = try optionalInt(key), number >= 0 else {
            throw ExtensionError.invalidParams("'\(key)' is a non-negative integer")
        }
        return number
    }

    func optionalNumber(_ key: String) throws -> Double? {
        guard let value = present(key) else { return nil }
        guard let number = value.doubleValue, number.isFinite else {
            throw ExtensionError.invalidParams("'\(key)' is a number of seconds")
        }
        return number
    }

    func optionalMode(_ key: String) throws -> Int? {
        guard let mode = try optionalInt(key) else { return nil }
        guard (0...0o7777).contains(mode) else { throw ExtensionError.invalidParams("'\(key)' is 0 to 0o7777") }
        return Int(mode)
    }

    func version(_ key: String) throws -> ItemVersion {
        guard let object = try optionalObject(key), case .string(let content) = object["content"],
            case .string(let metadata) = object["metadata"]
        else { throw ExtensionError.invalidParams("'\(key)' is {content: string, metadata: string}") }
        return ItemVersion(contentVersion: content, metadataVersion: metadata)
    }
}
