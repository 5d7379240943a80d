import Glibc
import Testing

@testable import ScopeFS

/// The bounded cache of folder descriptors (issue 29, finding 2; SPEC S40):
/// at most `capacity` slots hold a descriptor, a folder used since the
/// hand's last pass is kept, and an evicted descriptor a request still
/// holds stays open until that request lets go.
@Suite final class FolderDescriptorCacheTests {
    /// A folder of this test alone: tests run in parallel, so a closed
    /// number may be reused by another test at once; it then names another
    /// folder.
    private let scratch: String = {
        var template = Array("/tmp/scopefs-folder-cache-XXXXXX".utf8CString)
        return String(cString: mkdtemp(&template))
    }()

    deinit { rmdir(scratch) }

    /// Whether `number` is still open on this test's folder.
    private func isOpen(_ number: Int32) -> Bool {
        (try? Sys.location(of: number)) == scratch
    }

    private func openRoot() -> Int32 { open(scratch, Sys.pathOnly | O_DIRECTORY | O_CLOEXEC) }

    private func filledSlot(_ cache: FolderDescriptorCache) -> (FolderSlot, Int32) {
        let number = openRoot()
        let slot = FolderSlot()
        _ = slot.install(FolderDescriptor(number))
        cache.admit(slot)
        return (slot, number)
    }

    @Test func holdsNoMoreThanItsCapacity() {
        let cache = FolderDescriptorCache(capacity: 8)
        let slots = (0..<100).map { _ in filledSlot(cache) }
        #expect(cache.held == 8)
        #expect(slots.filter { !$0.0.isEmpty }.count == 8)
        for (slot, _) in slots { _ = slot.evict() }
    }

    @Test func keepsAFolderUsedSinceTheLastPass() {
        let cache = FolderDescriptorCache(capacity: 4)
        let slots = (0..<4).map { _ in filledSlot(cache) }
        // As after a full pass of the hand; then only the first is used again.
        for (slot, _) in slots { slot.referenced.store(false, ordering: .relaxed) }
        _ = slots[0].0.take()
        let added = (0..<3).map { _ in filledSlot(cache) }
        #expect(!slots[0].0.isEmpty)
        #expect(cache.held == 4)
        for (slot, _) in slots + added { _ = slot.evict() }
    }

    @Test func anEvictedDescriptorStaysOpenWhileHeld() throws {
        let cache = FolderDescriptorCache(capacity: 1)
        let (first, number) = filledSlot(cache)
        let lease = try #require(first.take())
        let (second, _) = filledSlot(cache)  // evicts the first
        #expect(first.isEmpty)
        #expect(isOpen(number))
        withExtendedLifetime(lease) {}
        _ = consume lease
        #expect(!isOpen(number))
        _ = second.evict()
    }

    @Test func aPinnedSlotIsNeverEvictedByTheCache() {
        let number = openRoot()
        let pinned = FolderSlot(pinned: FolderDescriptor(number))
        let cache = FolderDescriptorCache(capacity: 1)
        let others = (0..<4).map { _ in filledSlot(cache) }
        #expect(pinned.take()?.number == number)
        #expect(isOpen(number))
        for (slot, _) in others { _ = slot.evict() }
    }
}
