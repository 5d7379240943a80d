import Control
import Foundation
import NIOCore
import PolicyStore
import Processes

/// Refuses connections from app processes (SPEC S46). The default sandbox
/// has no network, so an app cannot connect at all; an app run with
/// `--share-net` or `--no-sandbox` can, and would still need the token,
/// which it cannot read (0600, the owner's). This check is the second
/// wall: the kernel says which socket connected (`/proc/net/tcp`: its
/// inode and uid), and which process holds it (`/proc/PID/fd`).
///
/// - a socket of another user (the `scopefs-app` account apps of root run
///   as) is refused;
/// - a socket held by an app process, or by a process whose app cannot be
///   established, is refused: `CallerIdentity` says, by the attribution of
///   the daemon serving the state directory (run cgroups or process
///   events, so a non-root owner's runs are told apart too);
/// - a socket of the owner's uid whose holder cannot be read (a browser's
///   sandboxed network process) is let through to the token check.
public struct AppPeerCheck: Sendable {
    let callers: CallerIdentity
    let procRoot: String

    public init(state: StateDirectory, procRoot: String = "/proc") {
        self.procRoot = procRoot
        callers = CallerIdentity(
            source: .daemon(
                { pid in ControlClient.identify(pid: pid, state: state).map { $0.mapError { $0 as any Error } } },
                registrations: RegistrationWatch(state: state)),
            ownerUIDs: [getuid(), 0])
    }

    /// Why the peer may not see the page, or nil.
    public func refusal(remote: SocketAddress?, local: SocketAddress?) -> String? {
        guard let remote, let local else { return nil }  // a unix socket: its mode keeps others out
        guard remote.protocol == .inet || remote.protocol == .inet6 else { return nil }
        guard let socket = socketOwner(remote: remote, local: local) else {
            return "The connecting socket could not be identified; the page serves the owner only."
        }
        if socket.uid != getuid() && socket.uid != 0 {
            return
                "The connection comes from another user's process (uid \(socket.uid)); the page serves the owner only."
        }
        guard let pid = holder(ofSocket: socket.inode) else { return nil }
        let peer = callers.identify(pid: pid, uid: socket.uid)
        guard peer.isOwner else {
            return
                "The connection comes from \(peer.description) (pid \(pid)); only the owner may change grants (SPEC S46)."
        }
        return nil
    }

    struct SocketOwner: Equatable {
        var uid: UInt32
        var inode: UInt64
    }

    /// The client's end of the connection as `/proc/net/tcp` lists it: local
    /// address = the peer's, remote address = ours.
    func socketOwner(remote: SocketAddress, local: SocketAddress) -> SocketOwner? {
        guard let remoteKey = Self.procKey(remote), let localKey = Self.procKey(local) else { return nil }
        let file = remote.protocol == .inet6 ? "/net/tcp6" : "/net/tcp"
        guard let text = Self.readWhole(procRoot + file) else { return nil }
        return Self.find(in: text, local: remoteKey, remote: localKey)
    }

    /// A /proc file read to its end. Its size says 0 and the kernel hands
    /// it out a page or so per read, so a reader that trusts the size or
    /// reads once gets the first sockets only.
    static func readWhole(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else { return nil }
            if count == 0 { break }
            bytes += chunk[0..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Parses `/proc/net/tcp`'s table: `sl local rem st tx:rx tr:when retr uid timeout inode ...`.
    static func find(in table: String, local: String, remote: String) -> SocketOwner? {
        for line in table.split(separator: "\n").dropFirst() {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count > 9, fields[1].uppercased() == local, fields[2].uppercased() == remote,
                let uid = UInt32(fields[7]), let inode = UInt64(fields[9])
            else { continue }
            return SocketOwner(uid: uid, inode: inode)
        }
        return nil
    }

    /// An address as `/proc/net/tcp` writes it: the IPv4 address as a
    /// little-endian hex word (`0100007F` for 127.0.0.1), the port in hex.
    static func procKey(_ address: SocketAddress) -> String? {
        guard let port = address.port else { return nil }
        let portText = String(format: "%04X", port)
        switch address {
        case .v4(let v4):
            let raw = v4.address.sin_addr.s_addr  // network order in memory
            return String(format: "%08X", UInt32(littleEndian: raw)) + ":" + portText
        case .v6(let v6):
            var raw = v6.address.sin6_addr
            let words = withUnsafeBytes(of: &raw) { bytes in
                (0..<4).map { index in bytes.loadUnaligned(fromByteOffset: index * 4, as: UInt32.self) }
            }
            return words.map { String(format: "%08X", UInt32(littleEndian: $0)) }.joined() + ":" + portText
        default:
            return nil
        }
    }

    /// The process that holds socket `inode` open.
    func holder(ofSocket inode: UInt64) -> Int32? {
        let target = "socket:[\(inode)]"
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: procRoot) else { return nil }
        for entry in entries {
            guard let pid = Int32(entry), pid != getpid() else { continue }
            let folder = "\(procRoot)/\(entry)/fd"
            guard let fds = try? FileManager.default.contentsOfDirectory(atPath: folder) else { continue }
            for fd in fds
            where (try? FileManager.default.destinationOfSymbolicLink(atPath: "\(folder)/\(fd)")) == target {
                return pid
            }
        }
        return nil
    }
}
