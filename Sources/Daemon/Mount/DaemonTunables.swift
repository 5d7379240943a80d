import Dispatch
import Glibc

/// The daemon's periods, thread counts and sizes, named in one place. Each
/// trades responsiveness against wake-ups or memory; none is a policy
/// decision (those are in SPEC). docs/PERFORMANCE.md has the figures.
enum DaemonTunables {
    /// FUSE worker threads at most, and kept idle between bursts.
    static let maxWorkerThreads: UInt32 = 16
    static let maxIdleWorkerThreads: UInt32 = 4

    /// How often queued events reach the database: events --follow and
    /// `scopefs test` see them this much later; fewer, larger transactions.
    static let eventFlushPeriod: useconds_t = 100_000
    /// How soon the end of an app's session grants is tried again after
    /// the store took no write (a fleet's database away); meanwhile they
    /// are held revoked in the daemon.
    static let sessionEndRetrySeconds = 2.0
    /// How often the policy version is polled for changes made by another
    /// process (the CLI writes the database directly).
    static let policyPollPeriod: useconds_t = 250_000
    /// How long a revoke's install waits for the kernel to drop the pages
    /// it takes away before it is in force (`PolicyReloader.dropPagesEarly`):
    /// enough for cached pages, never for a read held by a download.
    static let earlyPageDropWait: DispatchTimeInterval = .milliseconds(100)
    /// How long the process tracker waits for fork and exit events before
    /// it looks at `stop` again.
    static let processEventWaitMilliseconds: Int32 = 200
    /// How long a mount-table poll waits before it looks at `stop` again.
    static let mountWatchWaitMilliseconds: Int32 = 500
    /// How often the node count is compared with its peak, to give memory back.
    static let memoryTrimPeriodSeconds: UInt32 = 1
    /// How long the node pruner waits after a pass that found no node the
    /// kernel could drop (`NodePruner`).
    static let nodePrunerBackoff: useconds_t = 100_000
    /// How often items are re-located when no change wakes the locator.
    static let itemLocatorPeriodSeconds: Double = 1
    /// Descriptor-table slots reserved at start, and the size below which
    /// reserving is not worth it (the kernel's first table holds 64).
    static let reservedDescriptors: rlim_t = 4096
    static let initialDescriptorTable: Int32 = 64
    /// Descriptors the owner's control socket holds back, to take and
    /// serve a request when the daemon is out of descriptors (`DescriptorReserve`).
    static let ownerReserveDescriptors = 8
    /// Descriptors the daemon keeps for itself out of its limit; apps'
    /// open files and folders share the rest (`DescriptorLimits`).
    static let daemonReservedDescriptors = 1024
    /// One app's budget of backing descriptors unless the mount says
    /// otherwise: four times the usual soft limit of a process.
    static let defaultDescriptorsPerApp = 4096
    /// How often the daemon sweeps what killed copies staged (one readdir
    /// of a folder that is normally empty): a kill -9 leaves nothing
    /// longer than this, even when no command runs (SPEC S34).
    static let partialCopySweepSeconds: Double = 10
    /// Folders that keep an O_PATH descriptor at a time, at most
    /// (`FolderDescriptorCache`); an eighth of the limit if that is less.
    static let folderDescriptors = 4096
}
