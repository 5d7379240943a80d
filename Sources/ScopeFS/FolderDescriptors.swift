import Glibc
import Synchronization

/// An O_PATH descriptor of a backed folder, closed when the last holder
/// lets go (issue 29, finding 2). Holding the object is the lease: a
/// request that took it may go on using the number after the cache evicted
/// the folder, and the number is never closed (and so never reused by
/// another open, which would aim the request's *at() calls at another
/// folder) under it. Keep the object alive for as long as the number is
/// used (`withExtendedLifetime`, or a local `let` in the same scope).
final class FolderDescriptor: Sendable {
    let number: Int32

    init(_ number: Int32) { self.number = number }

    deinit { Sys.close(number) }
}

/// Where a backed folder node keeps its descriptor, when it has one.
/// A domain root's (a container's or a provider's root) is pinned: held
/// for the node's lifetime, since every re-open starts from one. Any
/// other folder's may be evicted by `FolderDescriptorCache` and is then
/// opened again from its parent (`ScopeFileSystem.folderDescriptor`).
final class FolderSlot: Sendable {
    private let held: Mutex<FolderDescriptor?>
    /// The CLOCK algorithm's bit: set on each use, cleared by the cache's
    /// hand, which evicts a folder that was not used for a whole turn.
    let referenced = Atomic<Bool>(true)
    let isPinned: Bool
    /// How the folder is found again when its name no longer leads to it
    /// (`HostFileHandle`); nil where the file system has no handles.
    let handle: HostFileHandle?

    init(pinned descriptor: FolderDescriptor) {
        held = Mutex(descriptor)
        isPinned = true
        handle = nil
    }

    init(handle: HostFileHandle? = nil) {
        held = Mutex(nil)
        isPinned = false
        self.handle = handle
    }

    /// The descriptor if the folder has one now; nil: open it again.
    func take() -> FolderDescriptor? {
        let descriptor = held.withLock { $0 }
        if descriptor != nil, !isPinned, !referenced.load(ordering: .relaxed) {
            referenced.store(true, ordering: .relaxed)
        }
        return descriptor
    }

    /// Keeps `descriptor` unless another thread installed one first; the
    /// one kept is returned, and whether it was ours (then the caller adds
    /// the slot to the cache).
    func install(_ descriptor: FolderDescriptor) -> (kept: FolderDescriptor, installed: Bool) {
        held.withLock { held in
            if let existing = held { return (existing, false) }
            held = descriptor
            referenced.store(true, ordering: .relaxed)
            return (descriptor, true)
        }
    }

    /// Gives up the descriptor; returned so that it is closed (if no
    /// request holds it) outside every lock.
    func evict() -> FolderDescriptor? {
        held.withLock { held in
            defer { held = nil }
            return held
        }
    }

    var isEmpty: Bool { held.withLock { $0 == nil } }
}

/// At most `capacity` folders keep a descriptor (SPEC S40; docs/
/// DECISIONS.md, decision 45). A walk of a tree of any size makes the
/// kernel hold a node per folder it passes; each used to pin a descriptor
/// until the kernel forgot it, and a tree with more folders than the
/// daemon's limit could not be walked.
///
/// CLOCK, not LRU: a hit sets one atomic bit on its slot and takes no
/// shared lock; only a miss (an open) takes the ring's lock, and the hand
/// passes over slots used since its last turn.
///
/// Lock order: the ring's lock, then a slot's. A slot's lock is never held
/// while the ring's is taken.
final class FolderDescriptorCache: Sendable {
    let capacity: Int
    private let ring: Mutex<Ring>

    private struct Ring {
        var slots: [FolderSlot] = []
        var hand = 0
    }

    init(capacity: Int) {
        self.capacity = max(capacity, 1)
        ring = Mutex(Ring())
    }

    /// Adds a slot that just received its descriptor; evicts another
    /// folder's when the ring is full. The evicted descriptor is closed
    /// after the lock is released, once no request holds it.
    func admit(_ slot: FolderSlot) {
        let evicted: FolderDescriptor? = ring.withLock { ring in
            if ring.slots.count < capacity {
                ring.slots.append(slot)
                return nil
            }
            // Each slot is passed at most twice: the first pass clears its bit.
            while true {
                let candidate = ring.slots[ring.hand]
                if candidate.isEmpty || !candidate.referenced.exchange(false, ordering: .relaxed) {
                    ring.slots[ring.hand] = slot
                    ring.hand = (ring.hand + 1) % ring.slots.count
                    return candidate.evict()
                }
                ring.hand = (ring.hand + 1) % ring.slots.count
            }
        }
        _ = evicted  // closed here, outside the lock, if no request holds it
    }

    /// Folders holding a descriptor now (for tests and status).
    var held: Int { ring.withLock { ring in ring.slots.count(where: { !$0.isEmpty }) } }
}
