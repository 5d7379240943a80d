import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The daemon's control socket, `STATE/control.sock`, for the one request a
/// client library makes there: resolving a bookmark (docs/API.md "Item
/// metadata and bookmarks", SPEC S26, S27). One JSON line each way; the
/// daemon identifies the caller by SO_PEERCRED.
enum ControlSocket {
    /// The state directory the same way the CLI finds it (SPEC S1): the
    /// explicit one, else `$SCOPEFS_STATE`, else `$XDG_STATE_HOME/scopefs`,
    /// else `~/.local/state/scopefs`.
    static func stateDirectory(explicit: String?) -> String {
        let environment = ProcessInfo.processInfo.environment
        let cwd = FileManager.default.currentDirectoryPath
        func absolute(_ path: String) -> String { path.hasPrefix("/") ? path : cwd + "/" + path }
        if let explicit, !explicit.isEmpty { return absolute(explicit) }
        if let fromEnvironment = environment["SCOPEFS_STATE"], !fromEnvironment.isEmpty {
            return absolute(fromEnvironment)
        }
        if let xdg = environment["XDG_STATE_HOME"], xdg.hasPrefix("/") { return xdg + "/scopefs" }
        return (environment["HOME"] ?? NSHomeDirectory()) + "/.local/state/scopefs"
    }

    /// Sends `body` (one JSON object; nil when it could not be encoded) and
    /// decodes the answer; EINVAL / EPROTO when either is not JSON.
    static func ask<Answer: Decodable>(
        _ body: Data?, as type: Answer.Type, socketPath: String, operation: ScopeFSError.Operation, path: String? = nil
    ) throws(ScopeFSError) -> Answer {
        guard let body else { throw ScopeFSError(errno: EINVAL, operation: operation, path: path ?? socketPath) }
        let line = try exchange(body, socketPath: socketPath, operation: operation)
        guard let answer = try? JSONDecoder().decode(Answer.self, from: line) else {
            throw ScopeFSError(errno: EPROTO, operation: operation, path: path ?? socketPath)
        }
        return answer
    }

    /// Sends `request` (one JSON object) and returns the one-line answer.
    static func exchange(_ request: Data, socketPath: String, operation: ScopeFSError.Operation = .resolveBookmark)
        throws(ScopeFSError) -> Data
    {
        func failure(_ code: Int32) -> ScopeFSError {
            ScopeFSError(errno: code, operation: operation, path: socketPath)
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw failure(errno) }
        defer { close(fd) }

        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let pathBytes = Array(socketPath.utf8)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard pathBytes.count < capacity else { throw failure(ENAMETOOLONG) }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: pathBytes)
            raw[pathBytes.count] = 0
        }
        let connected = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        // A missing socket (ENOENT) would read as "item deleted": any
        // failure to connect means one thing, no daemon.
        guard connected == 0 else { throw failure(ECONNREFUSED) }

        // A path's byte that is not UTF-8 travels as `\udcXX` both ways
        // (SPEC S33a, `HostPathText`).
        var outgoing = HostPathText.escaped(request)
        outgoing.append(UInt8(ascii: "\n"))
        var sent = 0
        while sent < outgoing.count {
            let n = outgoing.withUnsafeBytes { raw in
                send(fd, raw.baseAddress! + sent, raw.count - sent, Int32(MSG_NOSIGNAL))
            }
            if n < 0 {
                if errno == EINTR { continue }
                throw failure(errno)
            }
            sent += n
        }

        var answer = Data()
        var chunk = [UInt8](repeating: 0, count: 4096)
        while !answer.contains(UInt8(ascii: "\n")) {
            guard answer.count < 1 << 20 else { throw failure(EPROTO) }
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 {
                if errno == EINTR { continue }
                throw failure(errno)
            }
            if n == 0 { break }
            answer.append(contentsOf: chunk[0..<n])
        }
        guard let end = answer.firstIndex(of: UInt8(ascii: "\n")) else { throw failure(EPROTO) }
        return HostPathText.decodable(answer[answer.startIndex..<end])
    }
}
