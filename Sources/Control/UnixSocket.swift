import CSystemShims
import Foundation
import Glibc

/// A stream Unix-domain socket carrying one JSON line each way.
package struct UnixSocket {
    package let descriptor: Int32

    package struct PeerCredentials {
        package var pid: Int32
        package var uid: uid_t
    }

    package static func listening(at path: String) throws -> UnixSocket {
        let socket = try make()
        unlink(path)
        var address = try address(path)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(socket.descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard bound == 0, listen(socket.descriptor, 64) == 0 else {
            let error = errno
            socket.close()
            throw POSIXError(POSIXErrorCode(rawValue: error) ?? .EIO)
        }
        chmod(path, 0o600)
        return socket
    }

    package static func connected(to path: String, timeoutSeconds: Int = 30) throws -> UnixSocket {
        let socket = try make()
        var address = try address(path)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(socket.descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard result == 0 else {
            let error = errno
            socket.close()
            throw POSIXError(POSIXErrorCode(rawValue: error) ?? .EIO)
        }
        socket.setTimeout(seconds: timeoutSeconds)
        return socket
    }

    private static func make() throws -> UnixSocket {
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        return UnixSocket(descriptor: descriptor)
    }

    private static func address(_ path: String) throws -> sockaddr_un {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { throw POSIXError(.ENAMETOOLONG) }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return address
    }

    /// The next connection, or the errno of a failed accept (EMFILE,
    /// ENFILE, ENOBUFS, ENOMEM…): the caller decides whether to wait and
    /// try again. Interruptions and connections aborted before they were
    /// taken are skipped here.
    package func accept() -> Result<UnixSocket, POSIXError> {
        while true {
            let client = CSystemShims.accept4(descriptor, nil, nil, Int32(SOCK_CLOEXEC.rawValue))
            if client >= 0 { return .success(UnixSocket(descriptor: client)) }
            let error = errno
            if error != EINTR && error != ECONNABORTED {
                return .failure(POSIXError(POSIXErrorCode(rawValue: error) ?? .EIO))
            }
        }
    }

    package func setTimeout(seconds: Int) {
        var time = timeval(tv_sec: seconds, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
    }

    /// The peer as the kernel knows it.
    package var peer: PeerCredentials? {
        var credentials = scopefs_ucred()
        var length = socklen_t(MemoryLayout<scopefs_ucred>.size)
        guard getsockopt(descriptor, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0 else { return nil }
        return PeerCredentials(pid: credentials.pid, uid: credentials.uid)
    }

    /// Reads one line (at most `limit` bytes); nil on EOF, error or overflow.
    /// Reads in chunks: each side sends one line and then waits for the
    /// other (or closes), so nothing after the newline is lost. A byte per
    /// `read` cost a status of a few hundred app processes tens of thousands
    /// of system calls, each a chance to be scheduled out under load.
    package func readLine(limit: Int = Self.requestLimit) -> Data? {
        var data = Data()
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while data.count <= limit {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { return nil }
            if let newline = chunk[..<count].firstIndex(of: UInt8(ascii: "\n")) {
                data.append(contentsOf: chunk[..<newline])
                return data.count <= limit ? data : nil
            }
            data.append(contentsOf: chunk[..<count])
        }
        return nil
    }

    /// The largest request the daemon reads (requests are small; app
    /// processes may send anything).
    package static let requestLimit = 64 * 1024
    /// The largest response the CLI reads: `status` lists every app process.
    package static let responseLimit = 64 * 1024 * 1024

    package func writeLine(_ data: Data) -> Bool {
        var payload = data
        payload.append(UInt8(ascii: "\n"))
        return payload.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let count = Glibc.write(descriptor, raw.baseAddress! + offset, raw.count - offset)
                if count < 0 && errno == EINTR { continue }
                if count <= 0 { return false }
                offset += count
            }
            return true
        }
    }

    package func close() { Glibc.close(descriptor) }
}
