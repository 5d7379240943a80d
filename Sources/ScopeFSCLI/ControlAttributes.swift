import CSystemShims
import CommandErrors
import Foundation
import Glibc
import HostText
import Policy
import PolicyStore

/// Reads a `user.scopefs.*` control attribute in this process (docs/API.md).
enum ControlAttributes {
    static func read(_ path: String, _ control: ControlAttributeName) throws(CommandError) -> String {
        let name = control.rawValue
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
        switch code {
        case ENODATA, ENOTSUP:
            // A file system that is not ScopeFS has no such attribute.
            throw CommandError(.notMounted, "\(path) is not inside a ScopeFS mount")
        case ENOENT:
            throw CommandError(.noInput, "\(path) does not exist (or is not granted to this app)")
        case EPERM where control == .start || control == .startUntilExit:
            throw CommandError(
                .refused,
                "cannot start accessing \(path): no active grant covers it, or this shell is not an app process "
                    + "(run it as one: scopefs run --app APP -- scopefs scope exec PATH -- CMD)")
        case EPERM, EDQUOT:
            throw CommandError(.refused, "\(name) of \(path): \(String(cString: strerror(code)))")
        default:
            throw CommandError(.ioError, "\(name) of \(path): \(String(cString: strerror(code)))")
        }
    }
}
