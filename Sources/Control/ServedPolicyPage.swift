import CSystemShims
import Glibc
import PolicyStore
import Synchronization

/// `STATE/served-policy`: the policy version the daemon serving the state
/// directory has installed, on a page it shares with the portal's
/// document layout, so that the layout's check before each lookup, open,
/// read and write (S13, S14) costs a memory load and one `fcntl` instead
/// of a control-socket round trip (issue 52: 150 µs each, four a round).
///
/// Three rules make the page exactly as current as a `servedPolicy`
/// request would be:
/// - The daemon publishes inside its reload (`PolicyReloader.reload`),
///   before it answers the request that asked for the change: after a
///   revoke through the daemon returns, the page names its version.
/// - The daemon holds an open file description lock on the page for as
///   long as it runs; the kernel lets go of it when the daemon ends,
///   however it ends. A page nobody holds is no daemon's: the reader asks
///   the store instead.
/// - A change written to the store without the daemon (the CLI found none
///   listening: it is gone, or going, or not yet serving) bumps the page's
///   count of such writes once it is stored (`storeChangedWithoutDaemon`).
///   A publication counts the writes it saw before it read the store's
///   version; one that saw fewer than the page holds now may predate the
///   write, and the reader asks the store. So neither a daemon's exit,
///   which may close its control socket before its lock, nor a CLI that
///   could not reach a live daemon leaves the layout behind the store.
///
/// The page's words (native-endian UInt64, written whole): 0 the format,
/// 1 the publication's sequence (odd while it is written), 2 what is
/// served (0 nothing yet, 1 nothing: failed closed, 2 the version in
/// word 3), 3 the version, 4 the direct writes the publication saw; word
/// 8, on a cache line of its own, the direct writes so far.
package enum ServedPolicyPage {
    static let size = 4096
    static let format: UInt64 = 0x5343_4653_504f_4c31  // "SCFSPOL1"
    private static let formatWord = 0
    private static let sequenceWord = 1
    private static let stateWord = 2
    private static let versionWord = 3
    private static let seenWord = 4
    private static let directWritesWord = 8

    package static func path(_ state: StateDirectory) -> String { state.path + "/served-policy" }

    /// What the page says the daemon serves.
    package enum Served: Equatable, Sendable {
        /// This policy version.
        case version(Int64)
        /// No grant at all: the daemon fails closed (SPEC S44, issue 15).
        case failedClosed
        /// The page cannot tell (no daemon holds it, it has published
        /// nothing yet, or the store changed behind it): ask the store.
        case unknown
    }

    private static func word(_ base: UnsafeMutableRawPointer, _ index: Int) -> UnsafeMutablePointer<UInt64> {
        (base + index * 8).assumingMemoryBound(to: UInt64.self)
    }

    /// Maps the page of `descriptor` (opened with `writable` or not); nil
    /// when the file is not a whole page yet.
    private static func map(_ descriptor: Int32, writable: Bool) -> UnsafeMutableRawPointer? {
        var status = stat()
        guard fstat(descriptor, &status) == 0, status.st_size >= size else { return nil }
        let protection = writable ? PROT_READ | PROT_WRITE : PROT_READ
        guard let base = mmap(nil, size, protection, MAP_SHARED, descriptor, 0), base != MAP_FAILED else {
            return nil
        }
        return base
    }

    // MARK: The daemon's side

    /// The daemon's publisher: nil when the page cannot be made (the
    /// layout then asks the store, as with no daemon) or another process
    /// holds it (a second daemon of the state directory, which the
    /// control socket refuses anyway).
    package final class Publisher: @unchecked Sendable {
        /// Open for the process's life, unused: it holds the lock.
        private let descriptor: Int32
        private let base: UnsafeMutableRawPointer
        /// Publications are made one at a time (under the reloader's lock);
        /// this keeps them ordered if another caller ever publishes.
        private let writing = Mutex<Void>(())

        package init?(state: StateDirectory) {
            let descriptor = ServedPolicyPage.path(state).withCString {
                open($0, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
            }
            guard descriptor >= 0 else { return nil }
            var status = stat()
            // Grown, never shrunk: a reader's mapping of the old page stays valid.
            guard fstat(descriptor, &status) == 0,
                status.st_size >= ServedPolicyPage.size || ftruncate(descriptor, off_t(ServedPolicyPage.size)) == 0,
                let base = ServedPolicyPage.map(descriptor, writable: true)
            else {
                close(descriptor)
                return nil
            }
            // What a daemon before this one published is not this one's:
            // gone before the lock makes the page trusted again.
            scopefs_shared_store(ServedPolicyPage.word(base, ServedPolicyPage.stateWord), 0)
            scopefs_shared_store(ServedPolicyPage.word(base, ServedPolicyPage.formatWord), ServedPolicyPage.format)
            guard scopefs_ofd_lock(descriptor) == 0 else {
                munmap(base, ServedPolicyPage.size)
                close(descriptor)
                return nil
            }
            self.descriptor = descriptor
            self.base = base
        }

        /// The direct writes so far: read before the store's version, and
        /// handed to `publish` with what that read installed.
        package func directWrites() -> UInt64 {
            scopefs_shared_load(ServedPolicyPage.word(base, ServedPolicyPage.directWritesWord))
        }

        /// Publishes the version served (nil: failed closed), as read after
        /// `directWrites` returned `seen`.
        package func publish(version: Int64?, seen: UInt64) {
            writing.withLock { _ in
                let sequence = ServedPolicyPage.word(base, ServedPolicyPage.sequenceWord)
                let next = scopefs_shared_load(sequence) | 1
                scopefs_shared_store(sequence, next)
                scopefs_shared_store(ServedPolicyPage.word(base, ServedPolicyPage.stateWord), version == nil ? 1 : 2)
                scopefs_shared_store(
                    ServedPolicyPage.word(base, ServedPolicyPage.versionWord), UInt64(bitPattern: version ?? 0))
                scopefs_shared_store(ServedPolicyPage.word(base, ServedPolicyPage.seenWord), seen)
                scopefs_shared_store(sequence, next + 1)
            }
        }
    }

    // MARK: The CLI's side

    /// Counts a change the caller wrote to the store without a daemon (see
    /// the type's comment), after it is stored. No page: no daemon ever
    /// published here, and no reader trusts one.
    package static func storeChangedWithoutDaemon(state: StateDirectory) {
        let descriptor = path(state).withCString { open($0, O_RDWR | O_CLOEXEC | O_NOFOLLOW) }
        guard descriptor >= 0 else { return }
        defer { close(descriptor) }
        guard let base = map(descriptor, writable: true) else { return }
        scopefs_shared_add(word(base, directWritesWord), 1)
        munmap(base, size)
    }

    // MARK: The layout's side

    /// Reads the page for the portal's layout, mapping it when it appears
    /// (a daemon started) and again when another file took its place.
    package final class Reader: Sendable {
        private let path: String
        private struct Mapping: @unchecked Sendable {
            var descriptor: Int32
            var base: UnsafeMutableRawPointer
            var inode: UInt64
        }
        private let mapping = Mutex<Mapping?>(nil)

        package init(state: StateDirectory) {
            path = ServedPolicyPage.path(state)
        }

        deinit {
            if let mapping = mapping.withLock({ $0 }) {
                munmap(mapping.base, ServedPolicyPage.size)
                close(mapping.descriptor)
            }
        }

        package func served() -> Served {
            mapping.withLock { mapping in
                if let current = mapping {
                    let served = Self.read(current)
                    if served != .unknown { return served }
                    // A daemon that ended, or a page replaced: look again.
                    var status = stat()
                    if stat(path, &status) == 0, UInt64(status.st_ino) == current.inode { return .unknown }
                    munmap(current.base, ServedPolicyPage.size)
                    close(current.descriptor)
                    mapping = nil
                }
                mapping = Self.open(path)
                return mapping.map(Self.read) ?? .unknown
            }
        }

        private static func open(_ path: String) -> Mapping? {
            let descriptor = path.withCString { Glibc.open($0, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) }
            guard descriptor >= 0 else { return nil }
            var status = stat()
            guard fstat(descriptor, &status) == 0, let base = ServedPolicyPage.map(descriptor, writable: false) else {
                close(descriptor)
                return nil
            }
            return Mapping(descriptor: descriptor, base: base, inode: UInt64(status.st_ino))
        }

        private static func read(_ mapping: Mapping) -> Served {
            // Held by a live daemon, or no daemon's at all.
            guard scopefs_ofd_locked(mapping.descriptor) == 1 else { return .unknown }
            let base = mapping.base
            guard scopefs_shared_load(ServedPolicyPage.word(base, ServedPolicyPage.formatWord)) == format else {
                return .unknown
            }
            let sequence = ServedPolicyPage.word(base, ServedPolicyPage.sequenceWord)
            // A publication is a few stores; one being written is waited
            // out briefly, then the store is asked (a daemon stopped mid-way).
            for _ in 0..<64 {
                let before = scopefs_shared_load(sequence)
                guard before & 1 == 0 else { continue }
                let state = scopefs_shared_load(ServedPolicyPage.word(base, ServedPolicyPage.stateWord))
                let version = Int64(
                    bitPattern: scopefs_shared_load(ServedPolicyPage.word(base, ServedPolicyPage.versionWord)))
                let seen = scopefs_shared_load(ServedPolicyPage.word(base, ServedPolicyPage.seenWord))
                guard scopefs_shared_load(sequence) == before else { continue }
                // Read after the publication: a direct write it did not see is counted by now.
                let directWrites = scopefs_shared_load(ServedPolicyPage.word(base, ServedPolicyPage.directWritesWord))
                guard seen == directWrites else { return .unknown }
                switch state {
                case 1: return .failedClosed
                case 2: return .version(version)
                default: return .unknown
                }
            }
            return .unknown
        }
    }
}
