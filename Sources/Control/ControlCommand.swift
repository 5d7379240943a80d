import CommandErrors
import Policy

/// Who may send an operation (SPEC S5). Each operation declares its
/// audience once, in `ControlRequest.Operation.audience`; the daemon's
/// router enforces it before any handler runs, and docs/SECURITY.md's
/// table is checked against it (Tests/docs).
public enum Audience: String, Sendable, CaseIterable {
    /// The owner's own processes, on the owner's socket only: everything
    /// that changes or surveys the isolation layer, or answers an app.
    case owner
    /// App processes only, on either endpoint: the request is about the
    /// sender's own documents, which the daemon knows from the kernel.
    case app
    /// Both; the handler answers each side its own way.
    case both
}

extension ControlRequest.Operation {
    /// The one place that says who may send what.
    public var audience: Audience {
        switch self {
        case .register, .reload, .status, .servedPolicy, .identify, .grant, .revoke, .restore, .forget, .agentNext,
            .agentAnswer,
            .pickForApp,
            .claimForTransfer, .faultAdd, .faultList, .faultClear, .providerContent, .endApp, .loseUnsynced:
            .owner
        case .resolve, .pick, .watch, .coordinate, .query:
            .app
        case .whoami, .release:
            .both
        }
    }
}

/// An owner's grant order, as `scopefs grant` takes it.
public struct GrantOrder: Codable, Sendable, Equatable {
    public var app: AppID
    public var provider: ProviderID
    public var path: String
    public var access: Access
    public var session: Bool
    public var wholeProvider: Bool

    public init(app: AppID, provider: ProviderID, path: String, access: Access, session: Bool, wholeProvider: Bool) {
        self.app = app
        self.provider = provider
        self.path = path
        self.access = access
        self.session = session
        self.wholeProvider = wholeProvider
    }
}

/// One typed value per control operation: what the code on both sides
/// handles. `ControlRequest` is only its shape on the wire (one JSON object
/// whose fields depend on `op`), which the three client libraries speak;
/// a request that lacks what its operation needs never becomes a command.
public enum ControlCommand: Sendable, Equatable {
    case register(app: AppID)
    /// `containerPaths` changed in `app`'s container behind the mount;
    /// `imported` are new inbox copies (SPEC S18).
    case reload(app: AppID?, containerPaths: [String]?, imported: [String]?)
    case status
    case servedPolicy
    case whoami
    /// Which app process `pid` is of (`CallerIdentity`).
    case identify(pid: Int32)
    case resolve(bookmark: String)
    case grant(GrantOrder)
    case revoke(app: AppID, grant: GrantID?)
    case restore(app: AppID, grant: GrantID?)
    case forget(app: AppID, grant: GrantID?)
    case pick(PickRequest, wait: Double?)
    case agentNext(app: AppID?, wait: Double?)
    case agentAnswer(pick: UInt64, answer: PickAnswer)
    /// The owner's portal backend asks the agent to pick for `app` (docs/PORTAL.md).
    case pickForApp(app: AppID, PickRequest, wait: Double?)
    case watch(after: UInt64?, wait: Double?)
    case coordinate(path: String, intent: String, wait: Double?)
    case release(claim: UInt64)
    case claimForTransfer([TransferItem], wait: Double?)
    case query(scope: String?, name: String?, digest: String?, wait: Double?)
    case faultAdd(FaultRule, seed: UInt64?)
    case faultList
    case faultClear(id: Int?)
    case providerContent(provider: ProviderID, action: ContentAction, path: String?)
    /// SIGKILL to every process of the app (issue 48).
    case endApp(app: AppID)
    /// Puts back what was written and not fsynced (all apps' when nil).
    case loseUnsynced(app: AppID?)

    /// The command a wire request carries, or what it lacks (a usage
    /// error, exit 64, which the daemon answers without running anything).
    public init(_ request: ControlRequest) throws(CommandError) {
        func need<T>(_ value: T?, _ what: String) throws(CommandError) -> T {
            guard let value else { throw CommandError(.usage, "\(request.op.rawValue) needs \(what)") }
            return value
        }
        switch request.op {
        case .register: self = .register(app: try need(request.app, "an app"))
        case .reload:
            self = .reload(app: request.app, containerPaths: request.containerPaths, imported: request.imported)
        case .status: self = .status
        case .servedPolicy: self = .servedPolicy
        case .whoami: self = .whoami
        case .identify: self = .identify(pid: try need(request.pid, "a pid"))
        case .resolve: self = .resolve(bookmark: try need(request.bookmark, "a bookmark"))
        case .grant: self = .grant(try need(request.grantOrder, "a grant order"))
        case .revoke: self = .revoke(app: try need(request.app, "an app"), grant: request.grant)
        case .restore: self = .restore(app: try need(request.app, "an app"), grant: request.grant)
        case .forget: self = .forget(app: try need(request.app, "an app"), grant: request.grant)
        case .pick: self = .pick(try need(request.pick, "a request"), wait: request.waitSeconds)
        case .agentNext: self = .agentNext(app: request.app, wait: request.waitSeconds)
        case .pickForApp:
            self = .pickForApp(
                app: try need(request.app, "an app"), try need(request.pick, "a request"), wait: request.waitSeconds)
        case .agentAnswer:
            self = .agentAnswer(pick: try need(request.pickID, "pickID"), answer: try need(request.answer, "answer"))
        case .watch: self = .watch(after: request.after, wait: request.waitSeconds)
        case .coordinate:
            self = .coordinate(
                path: try need(request.path, "a path and an intent (read or write)"),
                intent: try need(request.intent, "a path and an intent (read or write)"), wait: request.waitSeconds)
        case .release: self = .release(claim: try need(request.claim, "a claim"))
        case .claimForTransfer:
            self = .claimForTransfer(try need(request.transferItems, "1 to 16 items"), wait: request.waitSeconds)
        case .query:
            self = .query(scope: request.scope, name: request.name, digest: request.digest, wait: request.waitSeconds)
        case .faultAdd: self = .faultAdd(try need(request.fault, "a rule"), seed: request.seed)
        case .faultList: self = .faultList
        case .faultClear: self = .faultClear(id: request.faultID)
        case .endApp: self = .endApp(app: try need(request.app, "an app"))
        case .loseUnsynced: self = .loseUnsynced(app: request.app)
        case .providerContent:
            self = .providerContent(
                provider: try need(request.contentProvider, "a provider"),
                action: try need(request.contentAction, "an action"), path: request.path)
        }
    }

    /// The request on the wire.
    public var request: ControlRequest {
        var request = ControlRequest(op: operation)
        switch self {
        case .register(let app), .endApp(let app): request.app = app
        case .loseUnsynced(let app): request.app = app
        case .reload(let app, let paths, let imported):
            request.app = app
            request.containerPaths = paths
            request.imported = imported
        case .status, .servedPolicy, .whoami, .faultList: break
        case .identify(let pid): request.pid = pid
        case .resolve(let bookmark): request.bookmark = bookmark
        case .grant(let order): request.grantOrder = order
        case .revoke(let app, let grant), .restore(let app, let grant), .forget(let app, let grant):
            request.app = app
            request.grant = grant
        case .pick(let pick, let wait):
            request.pick = pick
            request.waitSeconds = wait
        case .agentNext(let app, let wait):
            request.app = app
            request.waitSeconds = wait
        case .pickForApp(let app, let pick, let wait):
            request.app = app
            request.pick = pick
            request.waitSeconds = wait
        case .agentAnswer(let id, let answer):
            request.pickID = id
            request.answer = answer
        case .watch(let after, let wait):
            request.after = after
            request.waitSeconds = wait
        case .coordinate(let path, let intent, let wait):
            request.path = path
            request.intent = intent
            request.waitSeconds = wait
        case .release(let claim): request.claim = claim
        case .claimForTransfer(let items, let wait):
            request.transferItems = items
            request.waitSeconds = wait
        case .query(let scope, let name, let digest, let wait):
            request.scope = scope
            request.name = name
            request.digest = digest
            request.waitSeconds = wait
        case .faultAdd(let rule, let seed):
            request.fault = rule
            request.seed = seed
        case .faultClear(let id): request.faultID = id
        case .providerContent(let provider, let action, let path):
            request.contentProvider = provider
            request.contentAction = action
            request.path = path
        }
        return request
    }

    public var operation: ControlRequest.Operation {
        switch self {
        case .register: .register
        case .reload: .reload
        case .status: .status
        case .servedPolicy: .servedPolicy
        case .whoami: .whoami
        case .identify: .identify
        case .resolve: .resolve
        case .grant: .grant
        case .revoke: .revoke
        case .restore: .restore
        case .forget: .forget
        case .pick: .pick
        case .agentNext: .agentNext
        case .agentAnswer: .agentAnswer
        case .pickForApp: .pickForApp
        case .watch: .watch
        case .coordinate: .coordinate
        case .release: .release
        case .claimForTransfer: .claimForTransfer
        case .query: .query
        case .faultAdd: .faultAdd
        case .faultList: .faultList
        case .faultClear: .faultClear
        case .providerContent: .providerContent
        case .endApp: .endApp
        case .loseUnsynced: .loseUnsynced
        }
    }
}
