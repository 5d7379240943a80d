import Policy
import Testing

@testable import ScopeFSCLI

/// `scopefs chaos`'s schedule (issue 18).
@Suite struct ChaosScheduleTests {
    func actions(seed: UInt64, count: Int = 50) -> [ChaosSchedule.Action] {
        var schedule = ChaosSchedule(seed: seed, rate: 4, grants: [3, 5, 9])
        return (0..<count).compactMap { _ in schedule.next() }
    }

    @Test("the same seed gives the same actions at the same offsets; another seed others")
    func replay() {
        #expect(actions(seed: 11) == actions(seed: 11))
        #expect(actions(seed: 11) != actions(seed: 12))
    }

    @Test("offsets grow, each grant alternates revoke and restore, the rate holds roughly")
    func shape() {
        let run = actions(seed: 5, count: 2000)
        #expect(zip(run, run.dropFirst()).allSatisfy { $0.offset <= $1.offset })
        for grant in [3, 5, 9] as [GrantID] {
            let kinds = run.filter { $0.grant == grant }.map(\.kind)
            #expect(kinds.first == .revoke)
            #expect(zip(kinds, kinds.dropFirst()).allSatisfy { $0 != $1 })
        }
        // 2000 actions at 4/s take about 500 s (sd of the sum: sqrt(2000)/4 = 11 s).
        #expect(abs(run.last!.offset - 500) < 60)
    }

    @Test("no grants or no rate: no action")
    func empty() {
        var none = ChaosSchedule(seed: 1, rate: 4, grants: [])
        #expect(none.next() == nil)
        var still = ChaosSchedule(seed: 1, rate: 0, grants: [1])
        #expect(still.next() == nil)
    }
}
