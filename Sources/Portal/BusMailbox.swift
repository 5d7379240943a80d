import Glibc
import Synchronization

/// Work for the bus thread, posted from others. sd-bus is not thread-safe,
/// and a FileChooser request waits minutes for the owner's agent: the wait
/// runs on its own thread, and the reply is posted here, for the bus
/// thread to send when `wakeDescriptor` (a pipe's end it polls) wakes it.
final class BusMailbox: Sendable {
    let wakeDescriptor: Int32
    private let wakeWriter: Int32
    private let posted = Mutex<[@Sendable () -> Void]>([])

    init() {
        var ends: [Int32] = [-1, -1]
        // Both ends non-blocking: a full pipe already holds a wake-up.
        _ = pipe(&ends)
        for end in ends {
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
            _ = fcntl(end, F_SETFL, O_NONBLOCK)
        }
        (wakeDescriptor, wakeWriter) = (ends[0], ends[1])
    }

    func post(_ work: @escaping @Sendable () -> Void) {
        posted.withLock { $0.append(work) }
        var one: UInt8 = 1
        _ = write(wakeWriter, &one, 1)
    }

    /// Runs what was posted; on the bus thread only.
    func deliver() {
        var drain = [UInt8](repeating: 0, count: 256)
        while read(wakeDescriptor, &drain, drain.count) > 0 {}
        let work = posted.withLock { posted in
            defer { posted.removeAll() }
            return posted
        }
        for item in work { item() }
    }
}

/// A message kept past its handler (a FileChooser call answered later).
/// Only the bus thread touches it; the wrapper lets it cross to the
/// waiting thread and back inside the posted closure.
struct HeldMessage: @unchecked Sendable {
    let message: OpaquePointer
}
