import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A failed start, stop or scope query, carrying the errno that the
/// getxattr(2) call returned (docs/API.md "Errors", SPEC S32).
///
/// Switch over `kind` for the cases an app usually handles, or read `errno`
/// (and `posixCode`) for the exact value:
///
///     do {
///         try ScopeFS.startAccessing(url)
///     } catch where error.kind == .denied {   // `error` is a ScopeFSError (typed throws)
///         // no active grant, or it was revoked (SPEC S6, S14)
///     } catch {
///         print(error)   // "start accessing /mnt/…: EDQUOT (…)"
///     }
public struct ScopeFSError: Error, Equatable, Hashable, Sendable, CustomStringConvertible {
    /// Which call failed.
    public enum Operation: String, Sendable {
        case start = "start accessing"
        case stop = "stop accessing"
        case scopeCount = "read the scope count of"
        case createBookmark = "create a bookmark of"
        case resolveBookmark = "resolve a bookmark through"
        case inspectReference = "read the item metadata of"
        case pick = "ask the picker agent through"
        case watch = "watch documents through"
        case coordinate = "coordinate access to"
    }

    /// What an errno means for a security scope.
    public enum Kind: Sendable, Equatable, Hashable {
        /// EPERM: no active grant of the caller's app covers the path, the
        /// grant is revoked, or the caller is not an app process
        /// (SPEC S6, S14).
        case denied
        /// EDQUOT: the process used up its budget of outstanding starts; it
        /// stays so until the process exits (SPEC S10).
        case budgetExhausted
        /// ENOENT: the path is not visible to the caller's app (SPEC S2, S3).
        case notVisible
        /// ENODATA, ENOTSUP or ENOSYS: the path is not inside a ScopeFS mount
        /// (or the mount does not offer the syscall API).
        case notScopeFS
        /// EBADMSG: a bookmark that was tampered with, truncated, or is not a
        /// ScopeFS bookmark (SPEC S25, S26).
        case invalidBookmark
        /// EPROTO: the mount or the daemon replied with a value that
        /// docs/API.md does not define.
        case unexpectedReply
        /// ECONNREFUSED on bookmark resolution: no daemon serves the state
        /// directory (its control socket is missing or nobody listens).
        case noDaemon
        /// ENOENT on bookmark resolution: the item the bookmark names no
        /// longer exists (SPEC S26), unlike `.notVisible` for a path.
        case itemDeleted
        /// ECANCELED: the user cancelled the picker (`documentPickerWasCancelled`).
        case cancelled
        /// ENXIO on a pick: no picker agent runs for the mount.
        case noAgent
        /// ETIMEDOUT on a pick: nobody answered in time.
        case timedOut
        /// Anything else (EINVAL for a URL that is not a file URL, I/O
        /// errors, ENOTCONN for a dead mount, …).
        case other
    }

    /// The errno of the failed call.
    public let errno: Int32
    /// The call that failed.
    public let operation: Operation
    /// The path it was made on (for `.resolveBookmark`: the control socket).
    public let path: String
    /// The daemon's own explanation, when it gave one (bookmark resolution).
    public let message: String?

    public init(errno: Int32, operation: Operation, path: String, message: String? = nil) {
        self.errno = errno
        self.operation = operation
        self.path = path
        self.message = message
    }

    /// The meaning of `errno` for a security scope.
    public var kind: Kind {
        switch errno {
        case EPERM: return .denied
        case EDQUOT: return .budgetExhausted
        case ENOENT where operation == .resolveBookmark: return .itemDeleted
        case ECONNREFUSED where operation == .resolveBookmark || operation == .pick: return .noDaemon
        case ECANCELED: return .cancelled
        case ENXIO where operation == .pick: return .noAgent
        case ETIMEDOUT: return .timedOut
        case ENOENT: return .notVisible
        case ENODATA, ENOTSUP, ENOSYS: return .notScopeFS
        case EBADMSG: return .invalidBookmark
        case EPROTO: return .unexpectedReply
        default: return .other
        }
    }

    /// `errno` as Foundation's `POSIXErrorCode`, when it is a known value.
    public var posixCode: POSIXErrorCode? { POSIXErrorCode(rawValue: errno) }

    /// The symbolic name of `errno` ("EPERM") for the values this library
    /// documents, else "errno N".
    public var errnoName: String {
        switch errno {
        case EPERM: return "EPERM"
        case ENOENT: return "ENOENT"
        case EDQUOT: return "EDQUOT"
        case EACCES: return "EACCES"
        case EINVAL: return "EINVAL"
        case ERANGE: return "ERANGE"
        case ENODATA: return "ENODATA"
        case ENOTSUP: return "ENOTSUP"
        case ENOSYS: return "ENOSYS"
        case EPROTO: return "EPROTO"
        case EBADMSG: return "EBADMSG"
        case ECONNREFUSED: return "ECONNREFUSED"
        case ENAMETOOLONG: return "ENAMETOOLONG"
        case ENOTCONN: return "ENOTCONN"
        case EIO: return "EIO"
        case ECANCELED: return "ECANCELED"
        case ENXIO: return "ENXIO"
        case ETIMEDOUT: return "ETIMEDOUT"
        default: return "errno \(errno)"
        }
    }

    public var description: String {
        "\(operation.rawValue) \(path): \(errnoName) (\(message ?? String(cString: strerror(errno))))"
    }
}

extension ScopeFSError: LocalizedError {
    public var errorDescription: String? { description }
}
