import Policy
import Synchronization

/// How many reads (or writers' opens) of one app wait for a download at
/// once, across every extension provider (SPEC S40). A waiting request
/// holds one of the mount's FUSE workers until its bytes come; without a
/// bound one app reading 16 placeholders of a slow store held every
/// worker, and every other app and the owner waited behind it. Past its
/// bound an app gets EAGAIN at once (and a `download-budget-exhausted`
/// event); other apps and the owner are not counted.
final class DownloadWaits: Sendable {
    let perApp: Int
    private let waiting = Mutex<[AppID: Int]>([:])

    /// A quarter of the workers: four apps at their bound leave the owner
    /// and local providers half of them.
    static let defaultPerApp = Int(DaemonTunables.maxWorkerThreads) / 4

    init(perApp: Int = DownloadWaits.defaultPerApp) { self.perApp = perApp }

    /// Takes one of `app`'s waits; false: it has `perApp` already.
    func enter(_ app: AppID) -> Bool {
        waiting.withLock { waiting in
            guard waiting[app, default: 0] < perApp else { return false }
            waiting[app, default: 0] += 1
            return true
        }
    }

    func leave(_ app: AppID) {
        waiting.withLock { waiting in
            let left = waiting[app, default: 1] - 1
            waiting[app] = left > 0 ? left : nil
        }
    }
}
