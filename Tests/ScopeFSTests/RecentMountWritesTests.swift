import Glibc
import Testing

@testable import ScopeFS

/// The echo check's memory of the mount's own writes (issue 21, SPEC S27a):
/// by file, as the last write left it, bounded.
@Suite struct RecentMountWritesTests {
    private func version(_ size: Int, _ seconds: Int = 1) -> FileVersion {
        var info = stat()
        info.st_size = size
        info.st_mtim = timespec(tv_sec: seconds, tv_nsec: 5)
        return FileVersion(info)
    }

    private func file(_ inode: UInt64) -> FileIdentity { FileIdentity(device: 3, inode: inode) }

    @Test("A file is as written only at the version the last write left")
    func lastVersionOnly() {
        var writes = RecentMountWrites()
        writes.record(file(1), as: version(10))
        #expect(writes.isAsWritten(file(1), version: version(10)))
        #expect(!writes.isAsWritten(file(1), version: version(10, 2)))
        #expect(!writes.isAsWritten(file(2), version: version(10)))
        writes.record(file(1), as: version(4))
        #expect(writes.isAsWritten(file(1), version: version(4)))
        #expect(!writes.isAsWritten(file(1), version: version(10)))
    }

    @Test("Past its capacity, the first file remembered is forgotten first")
    func bounded() {
        var writes = RecentMountWrites()
        for inode in 0...UInt64(RecentMountWrites.capacity) { writes.record(file(inode), as: version(1)) }
        #expect(!writes.isAsWritten(file(0), version: version(1)))
        #expect(writes.isAsWritten(file(1), version: version(1)))
        #expect(writes.isAsWritten(file(UInt64(RecentMountWrites.capacity)), version: version(1)))
    }
}
