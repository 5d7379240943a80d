/// The host's limits and timings (docs/PROVIDERS.md, "Limits"). The
/// defaults are the documented values; tests shrink the durations so that
/// a stall or a crash loop takes milliseconds, not minutes. Durations are
/// in seconds.
public struct ExtensionTunables: Sendable, Equatable {
    /// `initialize` must be answered within this.
    public var initializeTimeout: Double = 10
    /// A request with no answer and no `$/progress` for this long is
    /// cancelled (`$/cancel`) and its caller gets ETIMEDOUT.
    public var stallLimit: Double = 60
    /// A request cancelled (by a stall or by its caller) and still not
    /// answered this long after: the extension is killed and restarted.
    public var killAfterCancel: Double = 10
    /// How long a cancelled call waits for the answer already on its way
    /// before it throws `cancelled`.
    public var cancelGrace: Double = 0.5
    /// A call made while the extension is starting or restarting waits at
    /// most this long for it to run, then throws `unreachable`.
    public var waitForRunning: Double = 10
    /// Back-off before a restart: `restartDelay` doubled for each exit in
    /// the window, at most `restartDelayCap`.
    public var restartDelay: Double = 1
    public var restartDelayCap: Double = 300
    /// `maxExits` exits within `exitWindow` mark the provider failed.
    public var maxExits = 5
    public var exitWindow: Double = 600
    /// `stop`: the `shutdown` answer, the exit after `exit`, the exit after
    /// SIGTERM (then SIGKILL).
    public var shutdownTimeout: Double = 5
    public var exitTimeout: Double = 5
    public var terminateTimeout: Double = 5
    /// Requests in flight per extension; more wait for a free place.
    public var maxInFlight = 16
    /// Notifications per second (sustained) before the excess is dropped.
    public var notificationsPerSecond: Double = 100
    /// The longest line, both ways (without its `\n`).
    public var lineLimit = 1_048_576
    /// stderr: lines are cut at `stderrLineLimit` bytes; at most
    /// `stderrLinesPerSecond` reach the log.
    public var stderrLineLimit = 4096
    public var stderrLinesPerSecond: Double = 50

    public init() {}

    /// Small values for tests: every limit in tens of milliseconds.
    public static var fast: ExtensionTunables {
        var tunables = ExtensionTunables()
        tunables.initializeTimeout = 5
        tunables.stallLimit = 1
        tunables.killAfterCancel = 0.5
        tunables.cancelGrace = 0.2
        tunables.waitForRunning = 5
        tunables.restartDelay = 0.05
        tunables.restartDelayCap = 0.4
        tunables.exitWindow = 60
        tunables.shutdownTimeout = 1
        tunables.exitTimeout = 1
        tunables.terminateTimeout = 1
        return tunables
    }

    /// The back-off before the restart that follows the `exits`-th exit in
    /// the window (1, 2, 4, ... times `restartDelay`, capped).
    func restartDelay(afterExits exits: Int) -> Double {
        let doublings = max(0, min(exits - 1, 40))
        return min(restartDelay * Double(1 << UInt64(doublings)), restartDelayCap)
    }
}
