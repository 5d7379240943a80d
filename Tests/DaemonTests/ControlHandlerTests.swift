import CommandErrors
import Control
import Foundation
import Policy
import PolicyStore
import ScopeFS
import Testing

@testable import Daemon

/// The control handlers behind the router, each on its own services (no
/// mount): what every operation answers, good input and bad.
@Suite struct ControlHandlerTests {
    // As the router hands them over (`ControlRouter.admit`).
    private let app = AdmittedSender.app(AppCaller(app: "com.example.app", pid: getpid()))
    private let owner = AdmittedSender.owner(pid: getpid())

    @Test("issue 18: fault rules are added, listed and cleared; a bad rule or id is refused with its code")
    func faults() {
        let faults = FaultInjector()
        let added = FaultHandling.handle(.faultAdd(FaultRule(operation: "read", errno: EIO), seed: 1), faults: faults)
        #expect(added.ok)
        let id = added.faults?.first?.id
        #expect(id != nil)
        #expect(FaultHandling.handle(.faultList, faults: faults).faults?.map(\.id) == [id!])
        let bad = FaultHandling.handle(
            .faultAdd(FaultRule(operation: "nonsense", errno: EIO), seed: nil), faults: faults)
        #expect(bad.code == CommandError.Kind.usage.rawValue)
        #expect(FaultHandling.handle(.faultClear(id: 999), faults: faults).code == CommandError.Kind.unknown.rawValue)
        #expect(FaultHandling.handle(.faultClear(id: id), faults: faults).faults == [])
    }

    @Test("issue 17: a pick must be valid; nobody waits for an unknown answer; no agent means 69")
    func picks() {
        let broker = PickBroker()
        let tooManyTypes = PickRequest(mode: .open, contentTypes: Array(repeating: "public.text", count: 100))
        #expect(
            PickHandling.handle(.pick(tooManyTypes, wait: 0), from: app, picks: broker).code
                == CommandError.Kind.usage.rawValue)
        #expect(
            PickHandling.handle(.pick(PickRequest(mode: .open), wait: 0), from: app, picks: broker).code
                == CommandError.Kind.noDaemon.rawValue)
        let next = PickHandling.handle(.agentNext(app: nil, wait: 0), from: owner, picks: broker)
        #expect(next.ok && next.pending == nil)
        let answer = PickHandling.handle(
            .agentAnswer(pick: 42, answer: PickAnswer(cancelled: true)), from: owner, picks: broker)
        #expect(answer.code == CommandError.Kind.unknown.rawValue)
    }

    @Test("issue 51: an app's command handed an owner's sender is an internal error (70), not a crash")
    func misroutedAppCommand() {
        let broker = PickBroker()
        let response = PickHandling.handle(.pick(PickRequest(mode: .open), wait: 0), from: owner, picks: broker)
        #expect(response.code == CommandError.Kind.internalError.rawValue)
        #expect(response.message?.contains("'pick'") == true)
    }

    @Test("issue 35, S21a: the portal backend's pick reaches the agent for the app it names")
    func pickForApp() {
        let broker = PickBroker()
        let other = "com.example.other"
        #expect(
            PickHandling.handle(.pickForApp(app: other, PickRequest(mode: .open), wait: 0), from: owner, picks: broker)
                .code == CommandError.Kind.noDaemon.rawValue)
        let agent = AdmittedSender.owner(pid: getpid())
        let seen = NSLock()
        nonisolated(unsafe) var seenApp: String?
        let answering = Thread {
            let next = PickHandling.handle(.agentNext(app: nil, wait: 5), from: agent, picks: broker)
            guard let pending = next.pending else { return }
            seen.withLock { seenApp = pending.app }
            _ = PickHandling.handle(
                .agentAnswer(pick: pending.id, answer: PickAnswer(paths: ["Providers/local/a.txt"])), from: agent,
                picks: broker)
        }
        answering.start()
        usleep(200_000)  // the agent is polling before the request arrives
        let response = PickHandling.handle(
            .pickForApp(app: other, PickRequest(mode: .open), wait: 5), from: owner, picks: broker)
        #expect(response.ok)
        #expect(response.picked?.paths == ["Providers/local/a.txt"])
        #expect(seen.withLock { seenApp } == other)
    }

    @Test("issue 17: a claim is released only by the process that holds it; coordination needs a known intent")
    func coordination() {
        let coordinator = Coordinator(notices: NoticeBoard())
        let release = CoordinationHandling.handle(
            .release(claim: 5), from: app, coordinator: coordinator, snapshot: .empty, appRoot: "/m/com.example.app",
            containers: "/nonexistent")
        #expect(release.code == CommandError.Kind.unknown.rawValue)
        let badIntent = CoordinationHandling.handle(
            .coordinate(path: "Container/a", intent: "peek", wait: 0), from: app, coordinator: coordinator,
            snapshot: .empty, appRoot: "/m/com.example.app", containers: "/nonexistent")
        #expect(badIntent.code == CommandError.Kind.usage.rawValue)
        let ungranted = CoordinationHandling.handle(
            .coordinate(path: "Providers/local/secret", intent: "read", wait: 0), from: app,
            coordinator: coordinator, snapshot: .empty, appRoot: "/m/com.example.app", containers: "/nonexistent")
        #expect(ungranted.code == CommandError.Kind.noInput.rawValue)
        let transfer = CoordinationHandling.claimForTransfer(
            [], wait: 0, pid: owner.pid, coordinator: coordinator, snapshot: .empty, containers: "/nonexistent")
        #expect(transfer.code == CommandError.Kind.usage.rawValue)
    }

    @Test("issue 17: a query's scope is documents, external or all")
    func queryScope() {
        let answer = QueryHandling.handle(
            app: "com.example.app", scope: "everything", name: nil, digest: nil, wait: 0,
            state: StateDirectory(path: "/nonexistent")
        ) { .empty }
        #expect(answer.code == CommandError.Kind.usage.rawValue)
    }

    @Test("issue 17: a presenter's watch answers at once with a cursor when nothing happened")
    func watch() {
        let answer = DocumentHandling.watch(app: "com.example.app", after: nil, wait: 0, notices: NoticeBoard())
        #expect(answer.ok)
        #expect(answer.notices == [])
        #expect(answer.cursor != nil)
    }
}

/// The owner's policy commands against a real store in a temporary folder:
/// the code both the daemon and the CLI run (issue 30, SPEC S13-S16).
@Suite struct OwnerPolicyTests {
    func fixture() throws -> (StateDirectory, PolicyRepository, String) {
        let root = NSTemporaryDirectory() + "scopefs-owner-policy-\(UUID().uuidString)"
        let provider = root + "/provider"
        try FileManager.default.createDirectory(atPath: provider + "/docs", withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: provider + "/docs/a.txt", contents: Data("a".utf8))
        let state = StateDirectory(path: root + "/state")
        let repository = PolicyRepository(database: try PolicyDatabase.create(state))
        _ = try repository.addProvider(id: "local", directory: provider, name: nil)
        _ = try repository.addApp(id: "com.example.app", name: nil)
        return (state, repository, root)
    }

    @Test("SPEC S16, S14, S15: grant, revoke, restore and forget answer with the grants they changed")
    func lifecycle() throws {
        let (state, repository, root) = try fixture()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let order = GrantOrder(
            app: "com.example.app", provider: "local", path: "docs", access: .read, session: false,
            wholeProvider: false)
        let granted = try OwnerPolicy.apply(.grant(order), repository: repository, state: state)
        let grant = try #require(granted.granted?.grant)
        #expect(grant.access == .read)
        #expect(OwnerPolicy.changedGrants(granted) == [grant])
        let revoked = try OwnerPolicy.apply(
            .revoke(app: "com.example.app", grant: grant.id), repository: repository, state: state)
        #expect(revoked.revoked?.map(\.id) == [grant.id])
        #expect(try repository.grants(app: "com.example.app").first?.state == .revoked)
        let again = try OwnerPolicy.apply(
            .revoke(app: "com.example.app", grant: grant.id), repository: repository, state: state)
        #expect(again.revoked == [])
        let restored = try OwnerPolicy.apply(
            .restore(app: "com.example.app", grant: nil), repository: repository, state: state)
        #expect(restored.restored?.map(\.id) == [grant.id])
        let forgotten = try OwnerPolicy.apply(
            .forget(app: "com.example.app", grant: grant.id), repository: repository, state: state)
        #expect(forgotten.forgotten?.map(\.id) == [grant.id])
        #expect(forgotten.references == [])
        #expect(try repository.grants(app: "com.example.app").isEmpty)
    }

    @Test("SPEC S34: an unknown app or grant is refused with its code, and nothing changes")
    func badInput() throws {
        let (state, repository, root) = try fixture()
        defer { try? FileManager.default.removeItem(atPath: root) }
        do {
            _ = try OwnerPolicy.apply(.revoke(app: "nope", grant: nil), repository: repository, state: state)
            Issue.record("unknown app accepted")
        } catch { #expect(error.exitCode == CommandError.unknownApp("nope").exitCode) }
        do {
            _ = try OwnerPolicy.apply(
                .forget(app: "com.example.app", grant: 99), repository: repository, state: state)
            Issue.record("unknown grant accepted")
        } catch { #expect(error.kind == .unknown) }
        do {
            _ = try OwnerPolicy.apply(.status, repository: repository, state: state)
            Issue.record("a non-policy command applied")
        } catch { #expect(error.kind == .internalError) }
    }
}
