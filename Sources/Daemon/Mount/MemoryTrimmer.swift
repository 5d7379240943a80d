import CSystemShims
import Foundation
import ScopeFS

/// Gives memory back to the system after the kernel forgot many inodes
/// (a walk of a large tree): the node table's dictionaries keep their peak
/// capacity and glibc keeps freed memory in its arenas otherwise, so the
/// daemon's resident size would stay at its peak.
enum MemoryTrimmer {
    static func run(_ fileSystem: ScopeFileSystem, until stop: @Sendable () -> Bool) {
        var peak = fileSystem.inodeCount
        while !stop() {
            sleep(DaemonTunables.memoryTrimPeriodSeconds)
            let count = fileSystem.inodeCount
            if count > peak {
                peak = count
            } else if peak - count > 10_000 && count < peak / 2 {
                fileSystem.compactNodeTable()
                _ = malloc_trim(0)
                peak = count
            }
        }
    }
}
