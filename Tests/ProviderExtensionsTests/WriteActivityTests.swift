import Policy
import Testing

@testable import ProviderExtensions

/// `WriteActivity` against a model (issue 47, SPEC S43): random writes
/// begun and ended on a few files, fsyncs and closes, and uploads that
/// snapshot and then ask whether they carried everything. The property:
/// an upload is taken for complete only if no change began or ended on
/// its file between its snapshot and its answer, and a snapshot is never
/// taken while a change is in progress. Seeded; the seed is in every
/// failure message.
@Suite struct WriteActivityTests {
    @Test("an upload is complete only when nothing changed its file since its snapshot", arguments: 1...40)
    func model(seed: UInt64) {
        var random = SeededGenerator(seed: seed)
        var activity = WriteActivity()
        var inProgress: [UInt64: Int] = [:]
        // Per file, the snapshot an upload holds: its generation and
        // whether a change began or ended after it (the model's answer).
        var uploads: [UInt64: (generation: UInt64, changedSince: Bool)] = [:]
        var now: UInt64 = 1_000_000_000
        for step in 0..<400 {
            let inode = UInt64.random(in: 1...3, using: &random)
            now += UInt64.random(in: 0...800_000_000, using: &random)
            switch Int.random(in: 0..<6, using: &random) {
            case 0, 1:
                activity.begin(inode, now: now)
                inProgress[inode, default: 0] += 1
                if uploads[inode] != nil { uploads[inode]!.changedSince = true }
            case 2:
                guard inProgress[inode, default: 0] > 0 else { continue }
                activity.end(inode, now: now)
                inProgress[inode, default: 0] -= 1
                if uploads[inode] != nil { uploads[inode]!.changedSince = true }
            case 3:
                activity.settle(inode)
            case 4:
                guard uploads[inode] == nil else { continue }
                switch activity.snapshotPoint(inode, quiet: 2, now: now) {
                case .success(let generation):
                    #expect(inProgress[inode, default: 0] == 0, "seed \(seed) step \(step): a snapshot mid-write")
                    uploads[inode] = (generation, false)
                case .failure(let wait):
                    #expect(wait.seconds > 0, "seed \(seed) step \(step)")
                }
            default:
                guard let upload = uploads.removeValue(forKey: inode) else { continue }
                let complete = activity.unchanged(inode, since: upload.generation)
                #expect(
                    complete == !upload.changedSince,
                    "seed \(seed) step \(step): the upload was taken for \(complete ? "complete" : "stale")")
            }
        }
    }
}

/// The activity of files gone from the replica is forgotten, so that a
/// daemon whose apps write and delete files for days keeps no entry per
/// file ever written (issue 47).
@Suite struct WriteActivityForgettingTests {
    @Test("a file written and gone is forgotten; one in progress or newer than the walk is kept")
    func forgetsGone() {
        var activity = WriteActivity()
        activity.begin(1, now: 10)
        activity.end(1, now: 11)  // written, then deleted before its upload
        activity.begin(2, now: 12)  // still being written
        activity.begin(3, now: 13)
        activity.end(3, now: 20)  // written after the walk began (at 15)
        activity.begin(4, now: 14)
        activity.end(4, now: 14)  // still in the replica
        activity.forgetGone(live: { $0 == 4 }, before: 15)
        #expect(Set(activity.files.keys) == [2, 3, 4])
    }
}
