import Glibc

/// The command line's polling periods, named in one place.
enum CLITunables {
    /// The clock step of a scenario (`scopefs test`) or a chaos schedule:
    /// how late a timed action may fire.
    static let scheduleTick: useconds_t = 2_000
    /// How often a process that was told to end is checked for its exit.
    static let exitPollPeriod: useconds_t = 10_000
    /// How long `scopefs test` waits for the daemon's last events to reach
    /// the database: a few of the daemon's flush periods (100 ms).
    static let eventSettleDelay: useconds_t = 400_000
    /// How often `scopefs events --follow` asks for new events.
    static let eventFollowPeriod: useconds_t = 200_000
}
