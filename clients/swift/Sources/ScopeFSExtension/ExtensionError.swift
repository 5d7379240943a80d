import Foundation

/// An error answer (docs/PROVIDERS.md "Errors"). The codes keep Apple's
/// `NSFileProviderError` names where one means the same (`noSuchItem`,
/// `notAuthenticated`, `serverUnreachable`, `insufficientQuota`,
/// `syncAnchorExpired`, `filenameCollision`, `directoryNotEmpty`); the
/// others are the protocol's own. `wireName` is the name PROVIDERS.md uses.
public struct ExtensionError: Error, Sendable, CustomStringConvertible {
    public enum Code: Int, Sendable, CaseIterable {
        case noSuchItem = -32001
        case conflict = -32002
        case notAuthenticated = -32003
        case serverUnreachable = -32004
        case insufficientQuota = -32005
        case syncAnchorExpired = -32006
        case notSupported = -32007
        case filenameCollision = -32008
        case directoryNotEmpty = -32009
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

        /// The name docs/PROVIDERS.md gives the code.
        public var wireName: String {
            switch self {
            case .serverUnreachable: return "unreachable"
            case .insufficientQuota: return "quota"
            case .syncAnchorExpired: return "anchorExpired"
            case .filenameCollision: return "exists"
            case .directoryNotEmpty: return "notEmpty"
            case .internalError: return "internal"
            default: return "\(self)"
            }
        }
    }

    public var code: Code
    public var message: String
    public var data: JSONValue?

    public init(_ code: Code, _ message: String = "", data: JSONValue? = nil) {
        self.code = code
        self.message = message.isEmpty ? code.wireName : message
        self.data = data
    }

    public var description: String { "\(code.wireName) (\(code.rawValue)): \(message)" }

    var json: JSONValue {
        var error: [String: JSONValue] = ["code": .int(Int64(code.rawValue)), "message": .string(message)]
        if let data { error["data"] = data }
        return .object(error)
    }

    public static func noSuchItem(_ message: String = "") -> ExtensionError { .init(.noSuchItem, message) }
    public static func invalidParams(_ message: String) -> ExtensionError { .init(.invalidParams, message) }
    public static func notSupported(_ message: String = "") -> ExtensionError { .init(.notSupported, message) }
    /// `current`, when given, goes to `data.current` (PROVIDERS.md `modify`).
    public static func conflict(_ message: String, current: Item? = nil) -> ExtensionError {
        .init(.conflict, message, data: current.map { .object(["current": $0.json]) })
    }

    /// The protocol error for a failed system call's errno (internal when none fits).
    public static func fromErrno(_ number: Int32, _ context: String = "") -> ExtensionError {
        let text = String(cString: strerror(number))
        let message = context.isEmpty ? text : "\(context): \(text)"
        switch number {
        case ENOENT, ENOTDIR: return .init(.noSuchItem, message)
        case EEXIST: return .init(.filenameCollision, message)
        case ENOTEMPTY: return .init(.directoryNotEmpty, message)
        case EDQUOT, ENOSPC: return .init(.insufficientQuota, message)
        case EACCES, EPERM, EROFS: return .init(.denied, message)
        case EFBIG: return .init(.tooLarge, message)
        case ENAMETOOLONG: return .init(.invalidName, message)
        case EINVAL: return .init(.invalidParams, message)
        case EAGAIN: return .init(.busy, message)
        case EINTR: return .init(.cancelled, message)
        case ENOTSUP: return .init(.notSupported, message)
        default: return .init(.internalError, message)
        }
    }
}
