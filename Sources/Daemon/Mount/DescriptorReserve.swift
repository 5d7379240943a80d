import Glibc
import Synchronization

/// A few descriptors held back from the start, so that the owner's request
/// can still be taken and served when everything else has run the daemon
/// out of descriptors (SPEC S40, "owner requests have their own reserve").
/// Closing them frees their numbers — low ones, opened early — for the
/// connection and what serving it opens (a database read, /proc); they are
/// opened again once that request is done. Another thread may take a freed
/// number first: the reserve makes the owner's answer likely at the limit,
/// the per-app descriptor budget (`DescriptorBudget`) keeps apps from
/// reaching the limit at all.
final class DescriptorReserve: Sendable {
    private let held: Mutex<[Int32]>
    private let size: Int

    init(size: Int) {
        self.size = size
        held = Mutex((0..<size).compactMap { _ in Self.placeholder() })
    }

    /// Closes the reserve; false when nothing was held (already in use).
    func release() -> Bool {
        let descriptors = held.withLock { held in
            defer { held.removeAll() }
            return held
        }
        descriptors.forEach { close($0) }
        return !descriptors.isEmpty
    }

    /// Opens the reserve again, as far as descriptors are free.
    func refill() {
        held.withLock { held in
            while held.count < size, let descriptor = Self.placeholder() { held.append(descriptor) }
        }
    }

    private static func placeholder() -> Int32? {
        let descriptor = open("/dev/null", O_RDONLY | O_CLOEXEC)
        return descriptor >= 0 ? descriptor : nil
    }
}
