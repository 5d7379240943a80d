import Foundation
import Glibc
import Synchronization

/// What the daemon asks of a provider extension (docs/PROVIDERS.md), as
/// blocking calls on the caller's thread: a FUSE worker waiting for a
/// download, the sync thread, the upload queue. `ExtensionHost` is the
/// real one (a supervised child process speaking JSON-RPC on stdio); the
/// replica and its queue only know this protocol (SPEC S41).
public protocol ExtensionCalls: AnyObject, Sendable {
    /// The extension's state now, for `status` and for the queue (it waits
    /// while the extension is not running).
    var state: ExtensionState { get }
    /// Called on the host's reader thread for each `changed` notification
    /// (coalescing is the caller's business). Set before `start`.
    var onChanged: (@Sendable () -> Void)? { get set }

    func item(_ id: String, _ control: RequestControl) throws(ExtensionFailure) -> ExtensionItem
    func list(_ folder: String, page: String?, _ control: RequestControl) throws(ExtensionFailure) -> ItemPage
    func currentAnchor(_ control: RequestControl) throws(ExtensionFailure) -> String
    func changes(since anchor: String, _ control: RequestControl) throws(ExtensionFailure) -> ItemChanges
    /// The staged file is checked (regular, link count 1, in the staging
    /// folder, size = length) before it is returned; the caller owns it.
    func fetch(_ id: String, version: String?, range: ByteRange?, _ control: RequestControl)
        throws(ExtensionFailure) -> FetchedFile
    func create(_ template: ItemTemplate, contents: String?, _ control: RequestControl)
        throws(ExtensionFailure) -> ExtensionItem
    func modify(
        _ id: String, baseVersion: ItemVersion, fields: ChangedFields, contents: String?, _ control: RequestControl
    ) throws(ExtensionFailure) -> ExtensionItem
    func delete(_ id: String, baseVersion: ItemVersion, _ control: RequestControl) throws(ExtensionFailure)
    /// The item's preview (protocol 1.2, capability `thumbnails`): a PNG
    /// of at most `ThumbnailLimits.bytes`, checked like a staged file; nil
    /// when the item has none. Defaults (ExtensionCalls+Thumbnails.swift)
    /// serve stores without previews.
    func thumbnail(_ id: String, size: Int, _ control: RequestControl) throws(ExtensionFailure) -> [UInt8]?
    /// `create` and `modify` with the preview the saving app wrote
    /// (`thumbnailPath`, a PNG in the staging folder, SPEC S50).
    func create(_ template: ItemTemplate, contents: String?, thumbnail: String?, _ control: RequestControl)
        throws(ExtensionFailure) -> ExtensionItem
    func modify(
        _ id: String, baseVersion: ItemVersion, fields: ChangedFields, contents: String?, thumbnail: String?,
        _ control: RequestControl
    ) throws(ExtensionFailure) -> ExtensionItem
}

public enum ExtensionState: Sendable, Equatable {
    case starting
    case running(ExtensionInfo)
    /// Exited or killed; restarting after the back-off.
    case restarting(reason: String, attempt: Int)
    /// Given up (5 exits in 10 min, `unsupportedVersion`): until its owner
    /// restarts it.
    case failed(reason: String)
    case stopped

    public var isRunning: Bool {
        if case .running = self { return true }
        return false
    }
}

/// `initialize`'s answer.
public struct ExtensionInfo: Sendable, Equatable {
    public var name: String
    public var version: String
    public var protocolVersion: String
    public var capabilities: ExtensionCapabilities

    public init(name: String, version: String, protocolVersion: String, capabilities: ExtensionCapabilities) {
        self.name = name
        self.version = version
        self.protocolVersion = protocolVersion
        self.capabilities = capabilities
    }
}

public struct ExtensionCapabilities: Sendable, Equatable {
    public enum Changes: String, Sendable { case notify, poll, none }
    public var changes: Changes = .none
    public var ranges = false
    public var create = false
    public var modify = false
    public var delete = false
    public var rename = false
    public var conditionalWrites = false
    public var maxPageSize = 1000
    public var symlinks = false
    public var renameKeepsId = true
    /// `fetch`'s `$/progress` names the staged file while it is written
    /// (`staged`), so readers get bytes as they come (docs/PROVIDERS.md).
    public var streamsFetch = false
    /// Which of `name`, `parent`, `mtime`, `mode` `modify` can set (the
    /// answer's list, else the documented default from `modify` and
    /// `rename`).
    public var settableFields: Set<String> = []
    /// The extension answers `thumbnail` (protocol 1.2, SPEC S50).
    public var thumbnails = false

    public init() {}
}

public enum ItemKind: String, Sendable, Codable { case file, folder, symlink }

public struct ItemVersion: Sendable, Hashable, Codable {
    public var content: String
    public var metadata: String

    public init(content: String, metadata: String) {
        self.content = content
        self.metadata = metadata
    }
}

/// An item as the extension describes it (docs/PROVIDERS.md, "Items"),
/// already checked against the limits: a valid name, an id of 1 to 2048
/// bytes, versions of at most 4096.
public struct ExtensionItem: Sendable, Hashable, Codable {
    public static let rootID = "root"
    public var id: String
    /// nil for the root only.
    public var parent: String?
    public var name: String
    public var kind: ItemKind
    public var size: Int64
    public var mtime: Double
    public var mode: UInt32
    public var version: ItemVersion
    public var target: String?
    /// The item's `thumbnail` field (SPEC S50): true, a preview exists;
    /// false, none; nil, not said (ask, when the extension has previews).
    public var thumbnail: Bool?

    public init(
        id: String, parent: String?, name: String, kind: ItemKind, size: Int64, mtime: Double, mode: UInt32,
        version: ItemVersion, target: String? = nil, thumbnail: Bool? = nil
    ) {
        self.id = id
        self.parent = parent
        self.name = name
        self.kind = kind
        self.size = size
        self.mtime = mtime
        self.mode = mode
        self.version = version
        self.target = target
        self.thumbnail = thumbnail
    }
}

public struct ItemPage: Sendable {
    public var items: [ExtensionItem]
    public var nextPage: String?
    public init(items: [ExtensionItem], nextPage: String?) {
        self.items = items
        self.nextPage = nextPage
    }
}

public struct ItemChanges: Sendable {
    public var updated: [ExtensionItem]
    public var deleted: [String]
    public var anchor: String
    public var more: Bool
    public init(updated: [ExtensionItem], deleted: [String], anchor: String, more: Bool) {
        self.updated = updated
        self.deleted = deleted
        self.anchor = anchor
        self.more = more
    }
}

public struct ByteRange: Sendable, Hashable {
    public var offset: Int64
    public var length: Int64
    public init(offset: Int64, length: Int64) {
        self.offset = offset
        self.length = length
    }
}

/// A staged file the caller now owns (rename it into the cache or unlink it).
public struct FetchedFile: Sendable {
    public var path: String
    public var version: String
    public var offset: Int64
    public var length: Int64
    public init(path: String, version: String, offset: Int64, length: Int64) {
        self.path = path
        self.version = version
        self.offset = offset
        self.length = length
    }
}

public struct ItemTemplate: Sendable {
    public var parent: String
    public var name: String
    public var kind: ItemKind
    public var mtime: Double?
    public var mode: UInt32?
    public var target: String?
    public init(parent: String, name: String, kind: ItemKind, mtime: Double?, mode: UInt32?, target: String? = nil) {
        self.parent = parent
        self.name = name
        self.kind = kind
        self.mtime = mtime
        self.mode = mode
        self.target = target
    }
}

public struct ChangedFields: Sendable, Equatable {
    public var name: String?
    public var parent: String?
    public var mtime: Double?
    public var mode: UInt32?
    public init(name: String? = nil, parent: String? = nil, mtime: Double? = nil, mode: UInt32? = nil) {
        self.name = name
        self.parent = parent
        self.mtime = mtime
        self.mode = mode
    }
    public var isEmpty: Bool { name == nil && parent == nil && mtime == nil && mode == nil }
}

/// The error codes of docs/PROVIDERS.md, "Errors".
public enum ExtensionErrorCode: Int, Sendable, CaseIterable {
    case noSuchItem = -32001
    case conflict = -32002
    case notAuthenticated = -32003
    case unreachable = -32004
    case quota = -32005
    case anchorExpired = -32006
    case notSupported = -32007
    case exists = -32008
    case notEmpty = -32009
    case cancelled = -32010
    case tooLarge = -32011
    case busy = -32012
    case invalidName = -32013
    case unsupportedVersion = -32014
    case notInitialized = -32015
    case denied = -32016
    case parseError = -32700
    case invalidRequest = -32600
    case methodNotFound = -32601
    case invalidParams = -32602
    case internalError = -32603

    public var name: String {
        switch self {
        case .parseError: "parseError"
        case .invalidRequest: "invalidRequest"
        case .methodNotFound: "methodNotFound"
        case .invalidParams: "invalidParams"
        case .internalError: "internal"
        default: "\(self)"
        }
    }
}

/// A failed call: the extension's error answer, or one the host made for
/// it (`unreachable` when the process died, `cancelled`, a stall).
public struct ExtensionFailure: Error, Sendable, Equatable {
    public var code: ExtensionErrorCode
    public var message: String
    /// `conflict`'s `data.version` (the current content version), when given.
    public var currentVersion: String?
    /// `busy`'s `data.retryAfter`, in seconds.
    public var retryAfter: Double?
    /// No answer and no progress within the stall limit (ETIMEDOUT).
    public var stalled: Bool

    public init(
        _ code: ExtensionErrorCode, _ message: String, currentVersion: String? = nil, retryAfter: Double? = nil,
        stalled: Bool = false
    ) {
        self.code = code
        self.message = message
        self.currentVersion = currentVersion
        self.retryAfter = retryAfter
        self.stalled = stalled
    }

    /// What an app waiting on this call gets (docs/PROVIDERS.md, "Errors").
    public var errno: Int32 {
        if stalled { return ETIMEDOUT }
        switch code {
        case .noSuchItem: return ENOENT
        case .conflict: return ESTALE
        case .notAuthenticated, .denied: return EACCES
        case .quota: return EDQUOT
        case .notSupported, .methodNotFound: return ENOTSUP
        case .exists: return EEXIST
        case .notEmpty: return ENOTEMPTY
        case .cancelled: return EINTR
        case .tooLarge: return EFBIG
        case .busy: return ETIMEDOUT
        case .invalidName: return EINVAL
        default: return EIO
        }
    }
}

/// As people read it, in `status`, events and logs: the code's name and
/// the message ("unreachable: the store is down"), not the structure.
extension ExtensionFailure: CustomStringConvertible {
    public var description: String {
        stalled ? "no answer within the stall limit: \(message)" : "\(code.name): \(message)"
    }
}

/// The part of a fetch's staged file written so far (a `$/progress`
/// with `staged`): `length` bytes from the file's start, which hold the
/// item's bytes from `offset`. `descriptor` is open for reading, checked
/// as a staged file (regular, one link, in the staging folder); the
/// receiver closes it.
public struct StagedPrefix: Sendable {
    public var descriptor: Int32
    public var offset: Int64
    public var length: Int64

    public init(descriptor: Int32, offset: Int64, length: Int64) {
        self.descriptor = descriptor
        self.offset = offset
        self.length = length
    }
}

/// One call's cancellation and progress, shared by the caller and the host.
public final class RequestControl: Sendable {
    private struct State {
        var cancelled = false
        var cancelHandler: (@Sendable () -> Void)?
    }

    private let state = Mutex(State())
    /// Called with (completed, total) for each `$/progress` of the call.
    public let onProgress: (@Sendable (Int64, Int64) -> Void)?
    /// Called for each `$/progress` of a fetch that names its staged file;
    /// nil: the host does not open it.
    public let onStaged: (@Sendable (StagedPrefix) -> Void)?

    public init(
        onProgress: (@Sendable (Int64, Int64) -> Void)? = nil, onStaged: (@Sendable (StagedPrefix) -> Void)? = nil
    ) {
        self.onProgress = onProgress
        self.onStaged = onStaged
    }

    public var isCancelled: Bool { state.withLock { $0.cancelled } }

    /// Cancels the call: the host sends `$/cancel` and the call throws
    /// `cancelled` (or returns, if the answer was already on its way).
    /// The handler runs after the lock is let go: it may take others.
    public func cancel() {
        let handler: (@Sendable () -> Void)? = state.withLock { state in
            guard !state.cancelled else { return nil }
            state.cancelled = true
            return state.cancelHandler
        }
        handler?()
    }

    /// The host's hook: called at once if the call is already cancelled.
    public func whenCancelled(_ handler: @escaping @Sendable () -> Void) {
        let now: Bool = state.withLock { state in
            if state.cancelled { return true }
            state.cancelHandler = handler
            return false
        }
        if now { handler() }
    }
}
