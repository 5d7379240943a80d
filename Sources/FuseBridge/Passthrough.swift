import CFuse3
import Dispatch
import Glibc
import Synchronization
import SystemPackage

/// What a file system says of one open file about FUSE passthrough
/// (`OpenFile.passthrough`; nil: the file never takes part).
public enum PassthroughOffer: Sendable {
    /// The kernel may read, write and map the file open as this descriptor
    /// itself, with no request to the daemon.
    case descriptor(Int32)
    /// Not this open: its reads and writes must reach the daemon. The
    /// kernel takes an open of a file that is open through passthrough
    /// only through passthrough too, so such an open still gets it.
    case declined
}

/// Whether the kernel reads and writes files itself, for `status`.
public struct PassthroughReport: Sendable, Equatable {
    public var isOn: Bool
    /// Why not, while off.
    public var reason: String?
    /// Files open through it now (one backing file each).
    public var openFiles: Int
    /// Opens served by the daemon because their file could not be
    /// registered, and why the last one could not.
    public var fallbacks: Int
    public var lastFallback: String?
}

/// One session's backing files (FUSE passthrough, `PassthroughWire`).
///
/// The kernel serves an inode's opens either all through passthrough, with
/// one backing file, or all through the daemon: an open that breaks the
/// rule fails with EIO. So each inode with an open file taking part is in
/// one mode until its last release: `.kernel` with the backing id of its
/// first open (registered with FUSE_DEV_IOC_BACKING_OPEN), later opens
/// answered with the same id; or `.daemon`, where offered opens stay with
/// the daemon until the inode is closed. The kernel drops its own hold of
/// an inode's backing file before it sends the last RELEASE, so an open
/// that takes the daemon's path after it never meets the old one.
///
/// An id is not closed at the reply (the kernel looks it up only when the
/// opener's thread processes the reply), nor at once at the last release:
/// registering and closing one around every open of a small file cost
/// more than the READ it saved (docs/PERFORMANCE.md). An idle id waits
/// `idleSeconds` for the next open, then a sweep closes it: it holds the
/// file, so one deleted on the host keeps its space until then. (A FORGET
/// does not say the kernel dropped the inode: it also returns the extra
/// lookup of a revalidated entry.)
///
/// Whether passthrough works at all is learnt once, after INIT: the file
/// system's probe file is registered and unregistered (`probe`). Before
/// that answer, opens go to the daemon and are counted, so none of them
/// meets a passthrough open of its inode.
final class PassthroughFiles: Sendable {
    private enum Availability {
        case pending
        case on
        case off(String)
    }

    private enum Mode {
        /// `idleSince`: when `opens` fell to 0 (`monotonicSeconds`).
        case kernel(id: Int32, opens: Int, idleSince: Double)
        case daemon(opens: Int)
    }

    private struct State {
        var availability = Availability.pending
        var inodes: [UInt64: Mode] = [:]
        /// The handles of the opens counted in `inodes`.
        var handles: Set<UInt64> = []
        /// The file system's probe file, until it is tried.
        var probe: Int32?
        var fallbacks = 0
        var lastFallback: String?
        var sweepScheduled = false
    }

    /// How long an idle backing id waits for its file's next open.
    static let idleSeconds = 5.0

    // A leaf lock: no system call runs while it is held.
    private let state = Mutex(State())
    /// False once passthrough was declined before any open: releases then
    /// skip the lock.
    private let tracksOpens = Atomic<Bool>(true)
    /// The session's /dev/fuse descriptor, set at mount and cleared before
    /// the session goes (the kernel then drops every id itself): the
    /// ioctls go to it.
    let device = Atomic<Int32>(-1)
    /// Where idle ids are closed, off the request threads.
    private let sweeper = DispatchQueue(label: "scopefs.passthrough")

    // MARK: Negotiation (INIT)

    /// At INIT, before the reply: the `max_stack_depth` to ask for, or 0
    /// when passthrough is not to be asked for. `probe` becomes ours.
    func negotiate(probe: Int32?, stackDepth: UInt32, kernelOffers: Bool) -> UInt32 {
        let refusal: String? =
            if probe == nil {
                "the file system offers no file for it"
            } else if !kernelOffers {
                "the kernel does not offer it (Linux 6.9+ built with CONFIG_FUSE_PASSTHROUGH)"
            } else if scopefs_has_cap_sys_admin() == 0 {
                "the daemon lacks CAP_SYS_ADMIN, which registering a backing file needs"
            } else {
                nil
            }
        guard let refusal else {
            state.withLock { $0.probe = probe }
            return stackDepth
        }
        if let probe { Glibc.close(probe) }
        decline(refusal)
        tracksOpens.store(false, ordering: .releasing)
        return 0
    }

    /// Passthrough is off for this session, for `reason`.
    func decline(_ reason: String) {
        let probe = state.withLock { state in
            state.availability = .off(reason)
            defer { state.probe = nil }
            return state.probe
        }
        if let probe { Glibc.close(probe) }
    }

    /// After the INIT reply that agreed passthrough reached the kernel:
    /// registers the probe file and unregisters it, and says whether
    /// passthrough is on.
    func probe() {
        guard let probe = state.withLock({ $0.probe }) else { return }
        let device = device.load(ordering: .acquiring)
        switch PassthroughWire.register(probe, on: device) {
        case .success(let id):
            PassthroughWire.unregister(id, on: device)
            Glibc.close(probe)
            state.withLock {
                $0.probe = nil
                $0.availability = .on
            }
        case .failure(let error):
            decline(Self.describe(error))
        }
    }

    static func describe(_ error: Errno) -> String {
        switch error {
        case .notPermitted:
            "registering a backing file was refused (EPERM): it needs CAP_SYS_ADMIN in the initial user namespace"
        case .tooManySymbolicLinkLevels:
            "the backing file system is stacked too deep for it (ELOOP)"
        default:
            "registering a backing file failed: \(String(cString: strerror(error.rawValue)))"
        }
    }

    // MARK: Opens

    /// At an OPEN or CREATE reply: the backing id to answer with, or nil
    /// for the daemon to serve it. Counts the open for `released`.
    func opening(inode: UInt64, handle: UInt64, _ offer: PassthroughOffer?) -> Int32? {
        guard let offer else { return nil }
        enum Next {
            case answer(Int32?, closing: Int32?)
            case register(Int32)
        }
        let next: Next = state.withLock { state in
            switch state.availability {
            case .off: return .answer(nil, closing: nil)
            case .pending: return .answer(Self.count(inode, handle, &state, registered: nil), closing: nil)
            case .on:
                switch (state.inodes[inode], offer) {
                case (nil, .descriptor(let descriptor)): return .register(descriptor)
                case (.kernel(let id, opens: 0, _), .declined):
                    // No open uses the idle id: this one may take the daemon's path.
                    state.inodes[inode] = nil
                    return .answer(Self.count(inode, handle, &state, registered: nil), closing: id)
                default: return .answer(Self.count(inode, handle, &state, registered: nil), closing: nil)
                }
            }
        }
        let device = device.load(ordering: .acquiring)
        guard case .register(let descriptor) = next else {
            guard case .answer(let id, let closing) = next else { return nil }
            if let closing { PassthroughWire.unregister(closing, on: device) }
            return id
        }
        let registered = PassthroughWire.register(descriptor, on: device)
        var surplus: Int32?
        let id = state.withLock { state in
            if case .failure(let error) = registered, state.inodes[inode] == nil {
                state.fallbacks += 1
                state.lastFallback = Self.describe(error)
            }
            let id = Self.count(inode, handle, &state, registered: try? registered.get())
            // Another open of the inode got in first: its mode stands.
            if case .success(let mine) = registered, mine != id { surplus = mine }
            return id
        }
        if let surplus { PassthroughWire.unregister(surplus, on: device) }
        return id
    }

    /// Counts one open of `inode` in its mode (a new inode takes the mode
    /// `registered` says) and returns the backing id to answer with.
    private static func count(_ inode: UInt64, _ handle: UInt64, _ state: inout State, registered: Int32?) -> Int32? {
        state.handles.insert(handle)
        switch state.inodes[inode] {
        case .kernel(let id, let opens, _):
            state.inodes[inode] = .kernel(id: id, opens: opens + 1, idleSince: 0)
            return id
        case .daemon(let opens):
            state.inodes[inode] = .daemon(opens: opens + 1)
            return nil
        case nil:
            state.inodes[inode] = registered.map { .kernel(id: $0, opens: 1, idleSince: 0) } ?? .daemon(opens: 1)
            return registered
        }
    }

    /// At a RELEASE (or a reply that did not reach its opener): the open
    /// is no longer counted; an inode in passthrough keeps its id, idle.
    func released(inode: UInt64, handle: UInt64) {
        guard tracksOpens.load(ordering: .acquiring) else { return }
        let sweep = state.withLock { state in
            guard state.handles.remove(handle) != nil else { return false }
            switch state.inodes[inode] {
            case .kernel(let id, let opens, _) where opens > 1:
                state.inodes[inode] = .kernel(id: id, opens: opens - 1, idleSince: 0)
            case .kernel(let id, _, _):
                state.inodes[inode] = .kernel(id: id, opens: 0, idleSince: Self.monotonicSeconds())
                let schedule = !state.sweepScheduled
                state.sweepScheduled = true
                return schedule
            case .daemon(let opens) where opens > 1:
                state.inodes[inode] = .daemon(opens: opens - 1)
            case .daemon, nil:
                state.inodes[inode] = nil
            }
            return false
        }
        if sweep { scheduleSweep() }
    }

    /// Closes, every `idleSeconds` while any are idle, the ids idle that long.
    private func scheduleSweep() {
        sweeper.asyncAfter(deadline: .now() + Self.idleSeconds) { [self] in
            let now = Self.monotonicSeconds()
            let (closing, idleLeft) = state.withLock { state in
                var closing: [Int32] = []
                var idleLeft = false
                for (inode, mode) in state.inodes {
                    guard case .kernel(let id, opens: 0, let since) = mode else { continue }
                    if now - since >= Self.idleSeconds {
                        state.inodes[inode] = nil
                        closing.append(id)
                    } else {
                        idleLeft = true
                    }
                }
                state.sweepScheduled = idleLeft
                return (closing, idleLeft)
            }
            let device = device.load(ordering: .acquiring)
            for id in closing { PassthroughWire.unregister(id, on: device) }
            if idleLeft { scheduleSweep() }
        }
    }

    private static func monotonicSeconds() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC_COARSE, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }

    // MARK: Status

    var report: PassthroughReport {
        state.withLock { state in
            var report = PassthroughReport(
                isOn: false, reason: nil, openFiles: 0, fallbacks: state.fallbacks, lastFallback: state.lastFallback)
            switch state.availability {
            case .on: report.isOn = true
            case .pending: report.reason = "not agreed with the kernel yet"
            case .off(let reason): report.reason = reason
            }
            report.openFiles = state.inodes.values.count {
                if case .kernel(_, let opens, _) = $0 { opens > 0 } else { false }
            }
            return report
        }
    }
}
