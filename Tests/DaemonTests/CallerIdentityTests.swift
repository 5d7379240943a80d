import Foundation
import Glibc
import Policy
import PolicyStore
import Processes
import Synchronization
import Testing

/// `CallerIdentity` (issue 46, finding 2; SPEC S5, S45, S46): the one
/// answer to who is calling, on the daemon's attribution, failing closed.
/// These run against this test process (the owner's, on the host: no run
/// cgroup, no `/.flatpak-info`) with attribution sources of their own.
@Suite struct CallerIdentityTests {
    private struct DaemonDown: Error {}

    private let me = getpid()
    private let uid = geteuid()

    private func identity(
        _ answer: CallerIdentity.Attribution, appUIDs: Set<uid_t> = []
    ) -> CallerIdentity {
        CallerIdentity(source: .tracker { _ in answer }, ownerUIDs: [geteuid()], appUIDs: appUIDs)
    }

    @Test("the daemon's app is the answer: a process of a run is its app, never the owner")
    func appOfTheRun() {
        #expect(identity(.app("com.example.alpha")).identify(pid: me, uid: uid) == .app("com.example.alpha"))
    }

    @Test("a live process of no app, of the owner's uid, is the owner's")
    func ownersProcess() {
        #expect(identity(.notApp).identify(pid: me, uid: uid) == .owner)
    }

    @Test("another uid is another user's, whatever the daemon would say")
    func otherUser() {
        #expect(identity(.app("com.example.alpha")).identify(pid: me, uid: uid &+ 4242) == .otherUser(uid &+ 4242))
    }

    @Test("the app account outside every run is a stranger, inside a run the app")
    func appAccount() {
        let account = uid &+ 7
        #expect(identity(.notApp, appUIDs: [account]).identify(pid: me, uid: account) == .otherUser(account))
        #expect(
            identity(.app("com.example.beta"), appUIDs: [account]).identify(pid: me, uid: account)
                == .app("com.example.beta"))
    }

    @Test("fail closed: what the daemon cannot tell, a gone process, no pid are unknown, never the owner")
    func failsClosed() {
        if case .unknown = identity(.unknown("the daemon failed")).identify(pid: me, uid: uid) {
        } else {
            Issue.record("an attribution failure must be unknown")
        }
        var gone: Int32 = 4_000_000
        while kill(gone, 0) == 0 || errno != ESRCH { gone += 1 }
        #expect(!identity(.notApp).identify(pid: gone, uid: uid).isOwner)
        #expect(!identity(.notApp).identify(pid: 0, uid: uid).isOwner)
        let failing = CallerIdentity(source: .daemon({ _ in .failure(DaemonDown()) }, registrations: nil))
        #expect(!failing.identify(pid: me, uid: uid).isOwner)
    }

    @Test("the daemon's answers over the control socket: an app, no app, no daemon")
    func daemonAnswers() {
        let asks = { (answer: Result<String?, any Error>?) in
            CallerIdentity(source: .daemon({ _ in answer }, registrations: nil)).identify(pid: getpid(), uid: geteuid())
        }
        #expect(asks(.success("com.example.alpha")) == .app("com.example.alpha"))
        #expect(asks(.success(nil)) == .owner)
        // No daemon serves the state directory: only the kernel's signs are
        // left, and this process shows neither.
        #expect(asks(nil) == .owner)
    }

    @Test("a kept 'no app' answer ends when a run registers (its journal record), an app answer does not")
    func keptAnswers() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("cid-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let state = StateDirectory(path: folder)
        // The daemon's socket stands for a daemon serving the state directory.
        #expect(FileManager.default.createFile(atPath: state.controlSocketPath, contents: nil))
        let watch = try #require(RegistrationWatch(state: state))
        let answer = Mutex<String?>(nil)
        let asked = Mutex(0)
        let identity = CallerIdentity(
            source: .daemon(
                { _ in
                    asked.withLock { $0 += 1 }
                    return .success(answer.withLock { $0 })
                }, registrations: watch))
        #expect(identity.identify(pid: me, uid: uid) == .owner)
        #expect(identity.identify(pid: me, uid: uid) == .owner)
        #expect(asked.withLock { $0 } == 1, "kept while nothing registered")
        // This process registers: the daemon knows it, then writes the record.
        answer.withLock { $0 = "com.example.alpha" }
        RunJournal(state: state).write(
            RunJournal.Record(
                daemon: 1, app: "com.example.alpha", launcher: ProcessKey(pid: me, startTime: 1), cgroup: nil,
                mountpoint: "/m"))
        #expect(identity.identify(pid: me, uid: uid) == .app("com.example.alpha"))
        answer.withLock { $0 = nil }
        #expect(identity.identify(pid: me, uid: uid) == .app("com.example.alpha"), "an app answer is kept")
        #expect(asked.withLock { $0 } == 2)
    }
}
