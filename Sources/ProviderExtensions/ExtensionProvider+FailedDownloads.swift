import Foundation

/// A download that failed answers, for a moment, the reads of its bytes
/// that come right after it (issue 47, docs/PROVIDERS.md "Downloads").
///
/// The kernel reads a file through its page cache: a read first sends the
/// readahead, whose error it drops, and then reads the page again itself,
/// and that second request's answer is the app's. Fetched again, a stall
/// gave the app its error only after two stall limits, or EIO when the
/// extension was killed ten seconds after the first (70 s where the stall
/// limit is 60 s), and a short answer cost two fetches per read. The
/// second request gets the first one's error instead: once, and only
/// within `tunables.failureRetryWindow` (the kernel asks again at once),
/// so that an app that reads again after its error, the store back,
/// fetches again.
extension ExtensionProvider {
    struct FailedDownload {
        var range: Range<Int64>
        var failure: ExtensionFailure
        var at: UInt64
        /// The extension was not running when it failed: once it runs
        /// again the failure says nothing of the next fetch.
        var extensionDown: Bool
    }

    /// Records a download's failure (under the lock). A cancel is the
    /// reader's own doing (a signal, a revoke), not the store's: nothing
    /// to answer another read with.
    func noteFailed(_ id: String, _ range: Range<Int64>, _ failure: ExtensionFailure, extensionDown: Bool) {
        guard failure.code != .cancelled else { return }
        let now = MonotonicClock.now
        var failed = (failedDownloads[id] ?? []).filter { now < $0.at &+ retryNanoseconds }
        failed.append(FailedDownload(range: range, failure: failure, at: now, extensionDown: extensionDown))
        failedDownloads[id] = failed
    }

    /// The failure a read of byte `offset` of `id` gets at once, if a
    /// download of it failed within `tunables.failureRetryWindow`; it answers one read
    /// (under the lock). `running`: the extension runs now, so a failure
    /// of a moment it did not is history: the read fetches (the model's
    /// seed 2: EIO after the extension was back). A store's own
    /// "unreachable" while it runs still answers the kernel's retry.
    func recentFailure(_ id: String, _ offset: Int64, running: Bool) -> ExtensionFailure? {
        guard var failed = failedDownloads[id] else { return nil }
        let now = MonotonicClock.now
        failed.removeAll { now >= $0.at &+ retryNanoseconds }
        if running { failed.removeAll(where: \.extensionDown) }
        let hit = failed.firstIndex { $0.range.contains(offset) }
        let failure = hit.map { failed.remove(at: $0).failure }
        failedDownloads[id] = failed.isEmpty ? nil : failed
        return failure
    }

    private var retryNanoseconds: UInt64 { MonotonicClock.nanoseconds(tunables.failureRetryWindow) }
}
