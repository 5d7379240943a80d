import CSystemShims
import Foundation
import Glibc
import PolicyStore

/// Reads a `user.scopefs.*` control attribute in this process (docs/API.md).
enum ControlAttributes {
    static func read(_ path: String, _ name: String) throws(ScopeFSError) -> String {
        var size = getxattr(path, name, nil, 0)
        while size >= 0 {
            var buffer = [UInt8](repeating: 0, count: size + 1)
            let count = getxattr(path, name, &buffer, buffer.count)
            if count >= 0 { return String(decoding: buffer[..<count], as: UTF8.self) }
            if errno != ERANGE { break }
            size = getxattr(path, name, nil, 0)
        }
        let code = errno
        let kind: ScopeFSError.Kind = code == ENOENT ? .noInput : code == EPERM || code == EDQUOT ? .refused : .ioError
        throw ScopeFSError(kind, "\(name) of \(path): \(String(cString: strerror(code)))")
    }
}
