import Foundation
import Policy
import ScopeFS

/// The revocations and restorations of `scopefs chaos` (issue 18), drawn
/// from one seed: the same seed, rate and grants give the same actions at
/// the same offsets, so a run that broke an app replays exactly. Pure: the
/// command performs the actions, this only decides them.
struct ChaosSchedule: Sendable {
    struct Action: Sendable, Equatable {
        enum Kind: String, Sendable { case revoke, restore }
        /// Seconds since the start of the run.
        var offset: Double
        var kind: Kind
        var grant: GrantID
    }

    private var generator: SeededGenerator
    private let grants: [GrantID]
    private let rate: Double
    private var revoked: Set<GrantID> = []
    private var clock = 0.0

    /// `rate`: actions per second on average (a Poisson process);
    /// `grants`: the app's grants that were active at the start.
    init(seed: UInt64, rate: Double, grants: [GrantID]) {
        generator = SeededGenerator(seed: seed)
        self.grants = grants
        self.rate = rate
    }

    /// The next action; nil when there is nothing to act on.
    mutating func next() -> Action? {
        guard !grants.isEmpty, rate > 0 else { return nil }
        // Exponential gaps between actions; 53 random bits make a uniform in [0, 1).
        let unit = Double(generator.next() >> 11) / Double(1 << 53)
        clock += -log(1 - unit) / rate
        let grant = grants[Int(generator.next() % UInt64(grants.count))]
        let kind: Action.Kind
        if revoked.contains(grant) {
            revoked.remove(grant)
            kind = .restore
        } else {
            revoked.insert(grant)
            kind = .revoke
        }
        // Offsets to the millisecond: what is printed is what is replayed.
        return Action(offset: (clock * 1000).rounded() / 1000, kind: kind, grant: grant)
    }
}
