import CSystemShims
import Foundation
import ScopeFS

/// Gives memory back to the system after the kernel forgot many inodes
/// (a walk of a large tree): glibc keeps freed node-table memory in its
/// arenas otherwise, and the daemon's resident size would stay at its peak.
enum MemoryTrimmer {
    static func run(_ fileSystem: ScopeFileSystem, until stop: @Sendable () -> Bool) {
        var peak = fileSystem.inodeCount
        while !stop() {
            sleep(2)
            let count = fileSystem.inodeCount
            if count > peak {
                peak = count
            } else if peak - count > 10_000 && count < peak / 2 {
                _ = malloc_trim(0)
                peak = count
            }
        }
    }
}
