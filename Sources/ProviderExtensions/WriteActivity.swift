/// What apps are doing to each replica file's content, so that an upload
/// never takes a write for uploaded that it did not carry (issue 47, SPEC
/// S43). Guarded by the provider's `lock`; in memory only: after a restart
/// the persisted dirty mark alone says a file must go up, and nothing is
/// being written.
///
/// Every change of content through the mount (each write, truncate,
/// fallocate, copy) is bracketed: `begin` before it, `end` once it is on
/// disk; each moves the file's `generation`. An upload takes its snapshot
/// only when no change is in progress, and reads the generation first; the
/// dirty mark is cleared only if the generation is the same after the
/// store took the snapshot. A write that landed during or after the
/// snapshot leaves the file dirty, and it goes up again.
///
/// A file being written is not taken for finished: its snapshot waits
/// until the file has been quiet for a moment, unless the app asked for
/// it to be durable (fsync) or closed it (`settle`), as Apple's File
/// Provider and rclone's write-back cache wait for a close or for quiet.
struct WriteActivity {
    struct File {
        /// Changes begun and not yet on disk.
        var inProgress = 0
        var generation: UInt64 = 0
        /// When the last change began or ended (MonotonicClock).
        var lastChange: UInt64 = 0
        /// The generation of the last fsync or close: while nothing was
        /// written since, the file goes up without waiting for quiet, as
        /// often as an upload is tried (one that failed does not make a
        /// settled file wait for quiet again: in the model's drain, with no
        /// quiet ever, it waited for good).
        var settledAt: UInt64?
    }

    private(set) var files: [UInt64: File] = [:]
    /// One counter for all files, so a generation is never reused, even
    /// for a file forgotten and written again.
    private var changes: UInt64 = 0

    mutating func begin(_ inode: UInt64, now: UInt64) {
        files[inode, default: File()].inProgress += 1
        touch(inode, now)
    }

    mutating func end(_ inode: UInt64, now: UInt64) {
        guard var file = files[inode] else { return }
        file.inProgress = max(0, file.inProgress - 1)
        files[inode] = file
        touch(inode, now)
    }

    /// The app fsynced or closed the file: what it wrote is meant whole.
    mutating func settle(_ inode: UInt64) {
        guard let file = files[inode] else { return }
        files[inode]?.settledAt = file.generation
    }

    /// Where a snapshot of `inode` taken now would stand: the generation
    /// to compare after the upload, or (nil) how many seconds to wait
    /// before asking again, while a change is in progress or the file is
    /// not yet quiet for `quiet` seconds.
    mutating func snapshotPoint(_ inode: UInt64, quiet: Double, now: UInt64) -> Result<UInt64, Wait> {
        guard let file = files[inode] else { return .success(0) }
        if file.inProgress > 0 { return .failure(Wait(seconds: min(quiet, 0.05))) }
        let quietFor = Double(now &- file.lastChange) / 1e9
        if file.settledAt != file.generation && quietFor < quiet { return .failure(Wait(seconds: quiet - quietFor)) }
        return .success(file.generation)
    }

    /// The generation to compare after reading `inode` now, without
    /// waiting for quiet (nil while a change is in progress): for a check
    /// of its content, not an upload.
    func generation(_ inode: UInt64) -> UInt64? {
        guard let file = files[inode] else { return 0 }
        return file.inProgress > 0 ? nil : file.generation
    }

    /// Whether nothing changed `inode` since `generation` was read; the
    /// entry is forgotten then (the file is as uploaded).
    mutating func unchanged(_ inode: UInt64, since generation: UInt64) -> Bool {
        guard let file = files[inode] else { return generation == 0 }
        guard file.inProgress == 0, file.generation == generation else { return false }
        files[inode] = nil
        return true
    }

    /// Forgets the files that are gone from the replica: not `live`, no
    /// change in progress, none since `before` (a walk of the folder began
    /// then, so a file made after it is not taken for gone). Without it a
    /// file written and deleted before its upload, or deleted remotely,
    /// would keep its entry for the daemon's life.
    mutating func forgetGone(live: (UInt64) -> Bool, before: UInt64) {
        files = files.filter { inode, file in
            live(inode) || file.inProgress > 0 || file.lastChange >= before
        }
    }

    struct Wait: Error {
        var seconds: Double
    }

    private mutating func touch(_ inode: UInt64, _ now: UInt64) {
        changes += 1
        files[inode, default: File()].generation = changes
        files[inode, default: File()].lastChange = now
    }
}
