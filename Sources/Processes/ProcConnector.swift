import CSystemShims
import Glibc

/// The kernel's process-events connector (netlink, CN_IDX_PROC): fork and
/// exit of every task, as they happen. It lets the daemon follow an app's
/// process tree through double forks (a daemonised grandchild is reparented
/// to init, but its fork was seen) and forget a thread's cached identity the
/// moment it exits, so a reused pid is never mistaken for the original.
/// Needs CAP_NET_ADMIN; without it the tracker validates identities through
/// /proc instead.
package final class ProcConnector: Sendable {
    package enum Event {
        case fork(parentTGID: Int32, childPID: Int32, childTGID: Int32)
        case exit(pid: Int32, tgid: Int32)
        /// A process replaced its program (reported with its thread-group ID).
        case exec(tgid: Int32)
        /// The socket overflowed: events were lost.
        case overflow
    }

    package let socket: Int32

    private static let netlinkConnector = scopefs_netlink_connector
    private static let procIndex: UInt32 = 1  // CN_IDX_PROC
    private static let procValue: UInt32 = 1  // CN_VAL_PROC
    private static let listen: UInt32 = 1  // PROC_CN_MCAST_LISTEN
    private static let headerSize = 16 + 20  // nlmsghdr + cn_msg

    package init?() {
        let descriptor = Glibc.socket(
            AF_NETLINK, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), Self.netlinkConnector)
        guard descriptor >= 0 else { return nil }
        var address = sockaddr_nl()
        address.nl_family = sa_family_t(AF_NETLINK)
        address.nl_groups = Self.procIndex
        address.nl_pid = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_nl>.size))
            }
        }
        var bufferSize: Int32 = 16 << 20
        _ = setsockopt(descriptor, SOL_SOCKET, 33 /* SO_RCVBUFFORCE */, &bufferSize, 4)
        guard bound == 0, Self.subscribe(descriptor) else {
            Glibc.close(descriptor)
            return nil
        }
        socket = descriptor
    }

    deinit { Glibc.close(socket) }

    private static func subscribe(_ descriptor: Int32) -> Bool {
        var message = [UInt8](repeating: 0, count: headerSize + 4)
        func put32(_ value: UInt32, at offset: Int) {
            withUnsafeBytes(of: value.littleEndian) { message.replaceSubrange(offset..<offset + 4, with: $0) }
        }
        put32(UInt32(message.count), at: 0)  // nlmsg_len
        message[4] = UInt8(NLMSG_DONE)  // nlmsg_type
        put32(UInt32(getpid()), at: 12)  // nlmsg_pid
        put32(procIndex, at: 16)  // cn_msg.id.idx
        put32(procValue, at: 20)  // cn_msg.id.val
        message[32] = 4  // cn_msg.len
        put32(listen, at: headerSize)
        return send(descriptor, message, message.count, 0) == message.count
    }

    /// Waits until events are pending (or `timeoutMilliseconds` pass).
    package func wait(timeoutMilliseconds: Int32) -> Bool {
        var poller = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
        return poll(&poller, 1, timeoutMilliseconds) > 0
    }

    /// Reads every pending event without blocking.
    package func drain(_ handle: (Event) -> Void) {
        var buffer = [UInt8](repeating: 0, count: 8192)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if count < 0 {
                if errno == EINTR { continue }
                if errno == ENOBUFS {
                    handle(.overflow)
                    continue
                }
                return
            }
            Self.parse(buffer[..<count], handle)
        }
    }

    private static func parse(_ bytes: ArraySlice<UInt8>, _ handle: (Event) -> Void) {
        let base = bytes.startIndex
        func int32(_ offset: Int) -> Int32 {
            var value: Int32 = 0
            withUnsafeMutableBytes(of: &value) { raw in
                for index in 0..<4 { raw[index] = bytes[base + offset + index] }
            }
            return Int32(littleEndian: value)
        }
        // proc_event: what (4), cpu (4), timestamp (8), then the event data.
        let event = headerSize
        guard bytes.count >= event + 16 + 16 else { return }
        let what = UInt32(bitPattern: int32(event))
        let data = event + 16
        switch what {
        case 0x1:  // PROC_EVENT_FORK
            handle(.fork(parentTGID: int32(data + 4), childPID: int32(data + 8), childTGID: int32(data + 12)))
        case 0x2:  // PROC_EVENT_EXEC: process_pid, process_tgid
            handle(.exec(tgid: int32(data + 4)))
        case 0x8000_0000:  // PROC_EVENT_EXIT
            handle(.exit(pid: int32(data), tgid: int32(data + 4)))
        default:
            break
        }
    }
}
