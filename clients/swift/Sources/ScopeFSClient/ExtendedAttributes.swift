import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The signature of glibc's `getxattr(2)` wrapper:
/// `ssize_t getxattr(const char *path, const char *name, void *value, size_t size)`.
private typealias GetxattrFunction =
    @convention(c) (
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
/// Each getxattr of `user.scopefs.start` or `.stop` with a buffer performs
/// the action, so a start or stop is exactly one call: with a buffer smaller
/// than 16 bytes the action would happen and the call fail with ERANGE
/// (docs/API.md), and the usual "ask the size with 0 first, then read" costs a
/// second request for nothing.
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
    let bytes = try readAttribute(attribute.rawValue, of: path, capacity: replyCapacity, for: operation)
    guard let reply = ControlReply(bytes) else {
        throw ScopeFSError(errno: EPROTO, operation: operation, path: path)
    }
    return reply
}

/// Reads an attribute that only reports (bookmarks, item metadata), growing
/// the buffer on ERANGE; reading these performs no action, so retrying is safe.
func readAttributeText(_ name: String, of path: String, for operation: ScopeFSError.Operation)
    throws(ScopeFSError) -> String
{
    var capacity = 1024
    while true {
        do {
            let bytes = try readAttribute(name, of: path, capacity: capacity, for: operation)
            return String(decoding: bytes, as: UTF8.self)
        } catch  where error.errno == ERANGE && capacity < 1 << 20 {
            capacity *= 16
        }
    }
}

/// Reads an attribute's bytes (a preview, SPEC S50), growing the buffer on
/// ERANGE up to the kernel's limit for one attribute (64 KiB).
func readAttributeBytes(_ name: String, of path: String, for operation: ScopeFSError.Operation)
    throws(ScopeFSError) -> [UInt8]
{
    var capacity = 8192
    while true {
        do {
            return try readAttribute(name, of: path, capacity: capacity, for: operation)
        } catch  where error.errno == ERANGE && capacity < 1 << 16 {
            capacity = 1 << 16
        }
    }
}

/// One getxattr(2) call with a buffer of `capacity` bytes.
private func readAttribute(_ name: String, of path: String, capacity: Int, for operation: ScopeFSError.Operation)
    throws(ScopeFSError) -> [UInt8]
{
    guard let getxattr = LibC.getxattr else {
        throw ScopeFSError(errno: ENOSYS, operation: operation, path: path)
    }
    var buffer = [UInt8](repeating: 0, count: capacity)
    let (length, callErrno): (Int, Int32) = buffer.withUnsafeMutableBytes { raw in
        let n = HostPathText.withCString(path) { getxattr($0, name, raw.baseAddress, raw.count) }
        return (n, n < 0 ? errno : 0)
    }
    guard length >= 0 else {
        throw ScopeFSError(errno: callErrno, operation: operation, path: path)
    }
    return Array(buffer.prefix(min(length, buffer.count)))
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
