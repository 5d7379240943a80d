import CSystemShims
import Foundation
import Glibc
import Policy
import PolicyStore

/// Reads a `user.scopefs.*` control attribute in this process (docs/API.md).
enum ControlAttributes {
    static func read(_ path: String, _ name: String) throws(ScopeFSError) -> String {
        // The path and the answer (`user.scopefs.path`) as host bytes (SPEC S33a).
        func attribute(_ buffer: UnsafeMutableRawPointer?, _ size: Int) -> Int {
            path.withHostCString { getxattr($0, name, buffer, size) }
        }
        var size = attribute(nil, 0)
        while size >= 0 {
            var buffer = [UInt8](repeating: 0, count: size + 1)
            let count = attribute(&buffer, buffer.count)
            if count >= 0 { return String(hostBytes: buffer[..<count]) }
            if errno != ERANGE { break }
            size = attribute(nil, 0)
        }
        let code = errno
        let kind: ScopeFSError.Kind = code == ENOENT ? .noInput : code == EPERM || code == EDQUOT ? .refused : .ioError
        throw ScopeFSError(kind, "\(name) of \(path): \(String(cString: strerror(code)))")
    }
}
