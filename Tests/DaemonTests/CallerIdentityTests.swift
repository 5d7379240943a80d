import Foundation
import Glibc
import Processes
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
        let failing = CallerIdentity(source: .daemon { _ in .failure(DaemonDown()) })
        #expect(!failing.identify(pid: me, uid: uid).isOwner)
    }

    @Test("the daemon's answers over the control socket: an app, no app, no daemon")
    func daemonAnswers() {
        let asks = { (answer: Result<String?, any Error>?) in
            CallerIdentity(source: .daemon { _ in answer }).identify(pid: getpid(), uid: geteuid())
        }
        #expect(asks(.success("com.example.alpha")) == .app("com.example.alpha"))
        #expect(asks(.success(nil)) == .owner)
        // No daemon serves the state directory: only the kernel's signs are
        // left, and this process shows neither.
        #expect(asks(nil) == .owner)
    }
}
