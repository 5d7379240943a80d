import CommandErrors
import Control
import Foundation
import Policy
import Synchronization
import Testing

@testable import Daemon

/// A handler that answers everything and remembers what reached it.
private final class RecordingHandler: ControlHandling {
    let received = Mutex<[ControlCommand]>([])
    let senders = Mutex<[AdmittedSender]>([])

    func answer(_ command: ControlCommand, from sender: AdmittedSender) -> ControlResponse {
        received.withLock { $0.append(command) }
        senders.withLock { $0.append(sender) }
        return ControlResponse(ok: true)
    }
}

/// One well-formed command per operation (checked to cover them all).
let sampleCommands: [ControlCommand] = [
    .register(app: "com.example.app"),
    .reload(app: "com.example.app", containerPaths: ["Documents/a"], imported: nil),
    .status,
    .servedPolicy,
    .whoami,
    .identify(pid: 42),
    .resolve(bookmark: "token"),
    .grant(
        GrantOrder(
            app: "com.example.app", provider: "local", path: "docs", access: .read, session: false,
            wholeProvider: false)),
    .revoke(app: "com.example.app", grant: 3),
    .restore(app: "com.example.app", grant: nil),
    .forget(app: "com.example.app", grant: 3),
    .pick(PickRequest(mode: .open, contentTypes: ["public.text"]), wait: 5),
    .agentNext(app: nil, wait: 1),
    .agentAnswer(pick: 7, answer: PickAnswer(cancelled: true)),
    .pickForApp(app: "com.example.app", PickRequest(mode: .open), wait: 5),
    .watch(after: 12, wait: 2),
    .coordinate(path: "Providers/local/docs/a", intent: "read", wait: 1),
    .release(claim: 4),
    .claimForTransfer([.provider("local", "docs/a")], wait: 1),
    .query(scope: "all", name: "*.txt", digest: "ab", wait: 0),
    .faultAdd(FaultRule(operation: "read", errno: EIO), seed: 9),
    .faultList,
    .faultClear(id: nil),
    .providerContent(provider: "cloud", action: .evict, path: "docs/a.txt"),
    .endApp(app: "com.example.app"),
    .loseUnsynced(app: nil),
]

/// The four kinds of sender the daemon meets.
private let owner = ControlSender(endpoint: .owner, pid: 10, app: nil)
private let appOnOwnerSocket = ControlSender(endpoint: .owner, pid: 11, app: "com.example.app")
private let appOnAppEndpoint = ControlSender(endpoint: .app, pid: 12, app: "com.example.app")
private let strangerOnAppEndpoint = ControlSender(endpoint: .app, pid: 13, app: nil)

/// The control router (issue 30): the audience of each operation is
/// enforced in one place, and malformed requests never reach a handler.
@Suite struct ControlRouterTests {
    @Test("the samples cover every operation")
    func samplesCoverEveryOperation() {
        #expect(Set(sampleCommands.map(\.operation)) == Set(ControlRequest.Operation.allCases))
    }

    @Test("SPEC S5: each operation reaches its handler only from its audience; others get 77")
    func audienceEnforced() {
        for command in sampleCommands {
            let audience = command.operation.audience
            let admitted: [(ControlSender, Bool)] = [
                (owner, audience != .app),
                (appOnOwnerSocket, audience != .owner),
                (appOnAppEndpoint, audience != .owner),
                (strangerOnAppEndpoint, audience == .both),
            ]
            for (sender, shouldPass) in admitted {
                let handler = RecordingHandler()
                let response = ControlRouter(handler: handler).answer(command.request, from: sender)
                let reached = handler.received.withLock { $0 } == [command]
                #expect(reached == shouldPass, "\(command.operation) from \(sender)")
                if shouldPass {
                    // Handed over as the audience admitted it: an app's command
                    // with its app, typed; the owner's without one.
                    let expected: AdmittedSender =
                        switch audience {
                        case .owner: .owner(pid: sender.pid)
                        case .app: .app(AppCaller(app: sender.app ?? "", pid: sender.pid))
                        case .both: .either(sender)
                        }
                    #expect(handler.senders.withLock { $0 } == [expected], "\(command.operation) from \(sender)")
                }
                if !shouldPass {
                    #expect(!response.ok)
                    #expect(response.code == CommandError.Kind.refused.rawValue, "\(command.operation) from \(sender)")
                }
            }
        }
    }

    @Test("SPEC S34: a request lacking what its operation needs is a usage error (64), never handled")
    func malformedRequestsAreUsageErrors() {
        let needsNothing: Set<ControlRequest.Operation> = [
            .reload, .status, .servedPolicy, .whoami, .agentNext, .watch, .query, .faultList, .faultClear,
            .loseUnsynced,
        ]
        for operation in ControlRequest.Operation.allCases {
            let handler = RecordingHandler()
            let sender = operation.audience == .app ? appOnAppEndpoint : owner
            let response = ControlRouter(handler: handler).answer(ControlRequest(op: operation), from: sender)
            let handled = !handler.received.withLock { $0 }.isEmpty
            if needsNothing.contains(operation) {
                #expect(handled, "\(operation)")
            } else {
                #expect(!handled, "\(operation)")
                #expect(response.code == CommandError.Kind.usage.rawValue, "\(operation)")
                #expect(response.message?.hasPrefix("\(operation.rawValue) needs") == true)
            }
        }
    }

    @Test("the wire shape does not change: each command survives JSON both ways")
    func wireRoundTrip() throws {
        for command in sampleCommands {
            let body = try JSONEncoder().encode(command.request)
            let decoded = try JSONDecoder().decode(ControlRequest.self, from: body)
            #expect(try ControlCommand(decoded) == command)
            let object = try JSONSerialization.jsonObject(with: body) as? [String: Any]
            #expect(object?["op"] as? String == command.operation.rawValue)
        }
    }

    @Test("an unknown operation is not a request: the server answers it as malformed")
    func unknownOperation() {
        let body = Data(#"{"op":"grantEverything","app":"com.example.app"}"#.utf8)
        #expect((try? JSONDecoder().decode(ControlRequest.self, from: body)) == nil)
    }
}

/// docs/SECURITY.md's table and the client libraries against the code.
@Suite struct AudienceDocumentationTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()

    @Test("docs/SECURITY.md names every operation with the audience the code declares")
    func securityTableMatchesCode() throws {
        let text = try String(contentsOf: Self.repository.appendingPathComponent("docs/SECURITY.md"), encoding: .utf8)
        let section = try #require(text.components(separatedBy: "### Control requests").dropFirst().first)
            .components(separatedBy: "\n### ")[0]
        var documented: [String: String] = [:]
        for line in section.split(separator: "\n") where line.hasPrefix("| `") {
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count >= 2 else { continue }
            documented[cells[0].trimmingCharacters(in: CharacterSet(charactersIn: "`"))] = cells[1]
        }
        for operation in ControlRequest.Operation.allCases {
            #expect(documented[operation.rawValue] == operation.audience.rawValue, "\(operation)")
        }
        let known = Set(ControlRequest.Operation.allCases.map(\.rawValue))
        #expect(Set(documented.keys).subtracting(known).isEmpty, "documented operations the code lacks")
    }

    @Test("SPEC S5: the app libraries send only operations an app may send")
    func clientsSendAppOperations() throws {
        let folders = ["clients/python", "clients/c", "clients/swift/Sources"]
        let pattern = try Regex(#"\\?"op\\?"\s*:\s*\\?"([A-Za-z]+)\\?""#)
        var sent: Set<String> = []
        for folder in folders {
            let root = Self.repository.appendingPathComponent(folder)
            let files = FileManager.default.enumerator(atPath: root.path)?.compactMap { $0 as? String } ?? []
            for file in files where [".py", ".c", ".h", ".swift"].contains(where: file.hasSuffix) {
                let text = (try? String(contentsOf: root.appendingPathComponent(file), encoding: .utf8)) ?? ""
                for match in text.matches(of: pattern) {
                    if let name = match.output[1].substring { sent.insert(String(name)) }
                }
            }
        }
        #expect(sent.isSuperset(of: ["resolve", "watch", "query", "coordinate", "release", "pick"]), "\(sent)")
        for name in sent {
            let operation = ControlRequest.Operation(rawValue: name)
            #expect(operation != nil, "a client sends unknown operation \(name)")
            #expect(operation?.audience != .owner, "a client library sends the owner's \(name)")
        }
    }
}
