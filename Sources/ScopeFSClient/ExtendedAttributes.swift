import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The signature of glibc's `getxattr(2)` wrapper:
/// `ssize_t getxattr(const char *path, const char *name, void *value, size_t size)`.
private typealias GetxattrFunction = @convention(c) (
    UnsafePointer<CChar>?, UnsafePointer<CChar>?, UnsafeMutableRawPointer?, Int
) -> Int

/// Where the getxattr(2) call of the C library comes from.
///
/// Swift's `Glibc` module does not include `<sys/xattr.h>`, and this target
/// may depend on Foundation only (no C shim target), so the C library's own
/// `getxattr` is looked up once with dlsym(3) in the global symbol scope
/// (libc is always loaded) and called through a C function pointer. This is
/// the same function a C program calls; nothing is reimplemented.
private enum LibC {
    static let getxattr: GetxattrFunction? = {
        guard let handle = dlopen(nil, RTLD_NOW), let symbol = dlsym(handle, "getxattr") else {
            return nil
        }
        return unsafeBitCast(symbol, to: GetxattrFunction.self)
    }()
}

/// The control replies are short ASCII values ("not-needed", "unbalanced", a
/// counter), so one buffer of this size always fits.
///
/// Each getxattr of `user.scopefs.start` or `.stop` performs the action, so
/// the usual "ask the size with 0 first, then read" pattern would count the
/// start twice. The library therefore makes exactly one call with a buffer
/// that is large enough for every documented reply (docs/API.md).
private let replyCapacity = 256

/// Reads a control attribute of `path` with one getxattr(2) call (following
/// a final symlink, so a reference document is followed to its original,
/// SPEC S6/S23) and parses the reply.
///
/// - Throws: `ScopeFSError` carrying the errno of the call (EPERM, EDQUOT,
///   ENOENT, … see docs/API.md "Errors"), or EPROTO when the reply is not one
///   of the documented values.
func readControlAttribute(
    _ attribute: ControlAttribute, of path: String, for operation: ScopeFSError.Operation
) throws(ScopeFSError) -> ControlReply {
    guard let getxattr = LibC.getxattr else {
        throw ScopeFSError(errno: ENOSYS, operation: operation, path: path)
    }
    var buffer = [UInt8](repeating: 0, count: replyCapacity)
    let (length, callErrno): (Int, Int32) = buffer.withUnsafeMutableBytes { raw in
        let n = getxattr(path, attribute.rawValue, raw.baseAddress, raw.count)
        return (n, n < 0 ? errno : 0)
    }
    guard length >= 0 else {
        throw ScopeFSError(errno: callErrno, operation: operation, path: path)
    }
    guard let reply = ControlReply(buffer.prefix(min(length, buffer.count))) else {
        throw ScopeFSError(errno: EPROTO, operation: operation, path: path)
    }
    return reply
}

extension URL {
    /// The file-system path of a `file:` URL, or an EINVAL error for any
    /// other scheme (security scopes exist only for files).
    func scopeFSPath(for operation: ScopeFSError.Operation) throws(ScopeFSError) -> String {
        guard isFileURL else {
            throw ScopeFSError(errno: EINVAL, operation: operation, path: absoluteString)
        }
        return withUnsafeFileSystemRepresentation { pointer in
            pointer.map { String(cString: $0) } ?? path
        }
    }
}
