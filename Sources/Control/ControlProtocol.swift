import Documents
import Foundation
import Policy

/// The control socket's messages: one JSON object per line each way.
/// The daemon trusts nothing in a request about who sent it: the peer's
/// pid and uid come from the kernel (SO_PEERCRED). This is the shape on
/// the wire only; code on both sides handles `ControlCommand`, and who may
/// send each operation is `Operation.audience`.
public struct ControlRequest: Codable, Sendable {
    public enum Operation: String, Codable, Sendable, CaseIterable {
        /// Make the sender the root of an app process tree (`scopefs run`).
        case register
        /// Re-read the isolation layer now (sent after every CLI change).
        case reload
        case status
        /// The policy version the daemon serves, or why it fails closed:
        /// what the portal's layout checks its cache against on each read
        /// (a local round trip, not a fleet database's; decision 65).
        case servedPolicy
        /// Resolve a bookmark for the sending app process (SPEC S26, S27).
        case resolve
        /// Which app the sender is a process of (`OwnerCheck`), if any.
        case whoami
        /// Which app process `pid` is of, by the daemon's attribution (run
        /// cgroups or process events): what the owner's other processes
        /// (`scopefs portal`, `scopefs settings`) ask to tell app processes
        /// from the owner's (`CallerIdentity`, SPEC S5, S45, S46).
        case identify
        /// The owner's four policy commands, served by the daemon whenever
        /// one serves the state directory (`OwnerPolicy`): it writes the
        /// database with its own connection and installs the change before
        /// it answers (SPEC S13), so the CLI neither opens the database nor
        /// asks `whoami` first (issue 15). A revoke the database cannot
        /// take is held by the daemon, never lost.
        case grant, revoke, restore, forget
        /// An app asks the user to pick documents (issue 17); answered by
        /// the owner's agent.
        case pick
        /// The owner's agent waits for the next pick request.
        case agentNext
        /// The owner's agent answers a pick request it took.
        case agentAnswer
        /// The owner's FileChooser portal backend asks the agent to pick
        /// for the app the portal frontend named (docs/PORTAL.md).
        case pickForApp
        /// An app's presenter waits for notices about its documents.
        case watch
        /// An app process claims an item for reading or writing (file
        /// coordination), or ends a claim.
        case coordinate
        case release
        /// The owner's `export` and `move` (commands, picker, agent) claim
        /// what they are about to write, as NSFileCoordinator does for the
        /// picker: apps' claims in the way are asked to relinquish, and the
        /// owner goes ahead after its wait even if they do not.
        case claimForTransfer
        /// An app's live query of its own documents (NSMetadataQuery).
        case query
        /// The owner's fault and latency rules (issue 18): add one, list
        /// them, clear one or all. Never an app's: an app that could clear
        /// its faults would pass the tests meant to catch it.
        case faultAdd, faultList, faultClear
        /// The owner's hand on an extension provider's content (SPEC S41,
        /// S42): sync now, pin, unpin or evict an item (`scopefs pin`, ...).
        case providerContent
        /// The owner ends every process of an app (`scopefs revoke --kill`,
        /// Android's `pm revoke`; issue 48).
        case endApp
        /// The owner loses what apps wrote and did not fsync while an
        /// `unsynced` rule was in force (issue 48, as LazyFS at a crash).
        case loseUnsynced

    }

    public var op: Operation
    public var app: AppID?
    public var bookmark: String?
    /// With `revoke`, `restore` and `forget`: the grant (nil: all of `app`'s).
    public var grant: GrantID?
    /// With `grant`: what to grant.
    public var grantOrder: GrantOrder?
    /// With `reload`: paths in `app`'s container that changed behind the
    /// mount, whose cached entries the daemon drops.
    public var containerPaths: [String]?
    /// With `pick`: what the app asks for.
    public var pick: PickRequest?
    /// With `agentAnswer`: the request answered, and the answer.
    public var pickID: UInt64?
    public var answer: PickAnswer?
    /// With `pick`, `agentNext` and `watch`: how long to wait, in seconds (capped).
    public var waitSeconds: Double?
    /// With `watch`: the cursor of the last notice seen (nil: from now on).
    public var after: UInt64?
    /// With `coordinate`: the item (a path in the app's view) and the intent
    /// ("read" or "write"); with `release`, the claim.
    public var path: String?
    public var intent: String?
    public var claim: UInt64?
    /// With `query`: documents, external or all (default), a name glob, and
    /// the digest of the results the client last saw (wait for a change).
    public var scope: String?
    public var name: String?
    public var digest: String?
    /// With `claimForTransfer`: the items to claim for writing.
    public var transferItems: [TransferItem]?
    /// With `reload`: container paths of copies `scopefs import` just put
    /// in `app`'s inbox (SPEC S18, `InboxKeeper`).
    public var imported: [String]?
    /// With `faultAdd`: the rule, and a seed to restart the percentages'
    /// draws from; with `faultClear`, the rule (nil: all).
    public var fault: FaultRule?
    public var seed: UInt64?
    public var faultID: Int?
    /// With `providerContent`: the provider, the action (sync, pin, unpin,
    /// evict) and, but for sync, the item's path in the provider (`path`).
    public var contentProvider: ProviderID?
    public var contentAction: ContentAction?
    /// With `identify`: the process asked about.
    public var pid: Int32?

    public init(
        op: Operation, app: AppID? = nil, bookmark: String? = nil, containerPaths: [String]? = nil,
        grant: GrantID? = nil,
        imported: [String]? = nil
    ) {
        self.imported = imported
        self.op = op
        self.grant = grant
        self.app = app
        self.bookmark = bookmark
        self.containerPaths = containerPaths
    }
}

/// An item an owner's transfer writes: an item of `app`'s container
/// (`provider` nil), or a provider item; `path` is relative to either.
public struct TransferItem: Codable, Sendable, Equatable {
    public var app: AppID?
    public var provider: ProviderID?
    public var path: String

    public static func container(_ app: AppID, _ path: String) -> TransferItem {
        TransferItem(app: app, provider: nil, path: path)
    }

    public static func provider(_ provider: ProviderID, _ path: String) -> TransferItem {
        TransferItem(app: nil, provider: provider, path: path)
    }
}

public struct ControlResponse: Codable, Sendable {
    public var ok: Bool
    /// The exit code a CLI should use when `ok` is false (docs/CLI.md).
    public var code: Int32?
    public var message: String?
    public var mountpoint: String?
    /// With `whoami`: the sender's app (nil for the owner's processes).
    public var app: AppID?
    public var status: DaemonStatus?
    /// With `servedPolicy`: the version served, and why every grant is
    /// denied when the daemon fails closed.
    public var servedVersion: Int64?
    public var servedFailure: String?
    public var resolution: BookmarkResolution?
    /// A resolved bookmark's path in the mount, as seen outside a sandbox.
    public var path: String?
    /// With `revoke`: the grants it revoked.
    public var revoked: [Grant]?
    /// With `restore`: the grants it restored.
    public var restored: [Grant]?
    /// With `grant`: the grant made or changed, and what changed in it.
    public var granted: GrantChange?
    /// With `forget`: the grants removed, and the container paths of the
    /// references to their items that went with them.
    public var forgotten: [Grant]?
    /// With `endApp`: the processes killed.
    public var ended: [Int32]?
    /// With `loseUnsynced`: how many files went back to their last fsync.
    public var lost: Int?
    public var references: [String]?
    /// With `agentNext`: the request to answer (nil: none came in time).
    public var pending: PendingPick?
    /// With `pick`: the agent's answer.
    public var picked: PickAnswer?
    /// With `coordinate`: the claim granted.
    public var claim: UInt64?
    /// With `query`: the app's documents, and their digest.
    public var results: [DocumentQuery.Result]?
    public var digest: String?
    /// With `claimForTransfer`: the claims held (release each when done).
    public var claims: [UInt64]?
    /// With `watch`: the app's notices, and the cursor to ask from next.
    public var notices: [PresenterNotice]?
    public var cursor: UInt64?
    /// With `register`: the daemon's pid, which `scopefs run` watches to
    /// end its app when the mount dies (issue 15).
    public var daemon: Int32?
    /// With `register`: the account the app is to run as (`AppAccount`);
    /// nil when the daemon runs as root and `scopefs-app` is missing.
    public var runAs: AppAccount?
    /// With `register`: the app endpoint to bind into the sandbox, outside
    /// the state directory (nil: `STATE/app.sock`).
    public var appEndpoint: String?
    /// With `faultAdd`, `faultList` and `faultClear`: the rules in force.
    public var faults: [FaultRule]?

    /// What the daemon answers to a request it cannot decode, an
    /// operation it does not know included.
    public static let malformedRequest = "malformed control request"

    public static func failure(_ code: Int32, _ message: String) -> ControlResponse {
        ControlResponse(ok: false, code: code, message: message)
    }

    package init(
        ok: Bool,
        code: Int32? = nil,
        message: String? = nil,
        mountpoint: String? = nil,
        app: AppID? = nil,
        status: DaemonStatus? = nil,
        resolution: BookmarkResolution? = nil,
        path: String? = nil,
        revoked: [Grant]? = nil,
        restored: [Grant]? = nil,
        pending: PendingPick? = nil,
        picked: PickAnswer? = nil,
        claim: UInt64? = nil,
        results: [DocumentQuery.Result]? = nil,
        digest: String? = nil,
        claims: [UInt64]? = nil,
        notices: [PresenterNotice]? = nil,
        cursor: UInt64? = nil,
        daemon: Int32? = nil,
        runAs: AppAccount? = nil,
        faults: [FaultRule]? = nil
    ) {
        self.ok = ok
        self.code = code
        self.message = message
        self.mountpoint = mountpoint
        self.app = app
        self.status = status
        self.resolution = resolution
        self.path = path
        self.revoked = revoked
        self.restored = restored
        self.pending = pending
        self.picked = picked
        self.claim = claim
        self.results = results
        self.digest = digest
        self.claims = claims
        self.notices = notices
        self.cursor = cursor
        self.daemon = daemon
        self.runAs = runAs
        self.faults = faults
    }
}

public struct DaemonStatus: Codable, Sendable {
    public struct AppProcessStatus: Codable, Sendable {
        public var pid: Int32
        public var app: AppID
        public var parent: Int32?
        public var scopes: [ScopeStatus]
        /// Outstanding successful starts (SPEC S10).
        public var budgetUsed: Int
        public var budgetExhausted: Bool
        /// The app's display name: filled in by the CLI from the database,
        /// never sent by the daemon (issue 19).
        public var appName: String?

        package init(
            pid: Int32,
            app: AppID,
            parent: Int32? = nil,
            scopes: [ScopeStatus],
            budgetUsed: Int,
            budgetExhausted: Bool,
            appName: String? = nil
        ) {
            self.pid = pid
            self.app = app
            self.parent = parent
            self.scopes = scopes
            self.budgetUsed = budgetUsed
            self.budgetExhausted = budgetExhausted
            self.appName = appName
        }
    }

    public struct ScopeStatus: Codable, Sendable {
        public var grant: GrantID
        public var path: String
        public var count: Int

        package init(
            grant: GrantID,
            path: String,
            count: Int
        ) {
            self.grant = grant
            self.path = path
            self.count = count
        }
    }

    public var pid: Int32
    public var mountpoint: String
    public var stateDirectory: String
    public var openFiles: String
    public var scopes: String
    public var scopeBudget: Int
    public var followsProcessEvents: Bool
    /// How app processes are told apart (a cgroup per run, or process events).
    public var attribution: String?
    public var policyGeneration: UInt64
    /// Why the daemon serves every grant as revoked (its database is gone,
    /// replaced or corrupt); nil while it serves the database (issue 15).
    public var policyFailure: String?
    /// A fleet host's name and its shared store (SPEC S44); nil for a
    /// state directory on its own SQLite file.
    public var fleetHost: String?
    public var fleetDatabase: String?
    public var inodes: Int
    public var processes: [AppProcessStatus]
    /// App processes of a previous daemon that outlived it, on its dead
    /// mount (issue 15): nothing reaches them through the mount any more.
    public var stranded: [StrandedProcessStatus]?

    public struct StrandedProcessStatus: Codable, Sendable {
        public var pid: Int32
        public var app: AppID
        /// The gone daemon the run registered with, and its mountpoint.
        public var daemon: Int32
        public var mountpoint: String
        /// Always "on a dead mount".
        public var state: String
        /// The app's display name, filled in by the CLI (issue 19).
        public var appName: String?

        package init(
            pid: Int32,
            app: AppID,
            daemon: Int32,
            mountpoint: String,
            state: String,
            appName: String? = nil
        ) {
            self.pid = pid
            self.app = app
            self.daemon = daemon
            self.mountpoint = mountpoint
            self.state = state
            self.appName = appName
        }
    }
    /// The fault and latency rules in force (issue 18).
    public var faults: [FaultRule]?
    /// The host-change channel (fanotify, inotify or none) and the kernel's
    /// cache timeout for entries and attributes, in seconds (issue 21).
    public var hostChanges: String?
    public var cacheTimeout: Double?
    /// Each extension provider's state, cache and queue (SPEC S41).
    public var extensions: [ProviderExtensionStatus]?
    /// Whether the kernel reads and writes container files itself (issue 33).
    public var containerPassthrough: ContainerPassthroughStatus?
    /// How requests reach the daemon: /dev/fuse or io_uring (`--io-uring`).
    public var fuseTransport: FuseTransportStatus?

    package init(
        pid: Int32,
        mountpoint: String,
        stateDirectory: String,
        openFiles: String,
        scopes: String,
        scopeBudget: Int,
        followsProcessEvents: Bool,
        attribution: String? = nil,
        policyGeneration: UInt64,
        policyFailure: String? = nil,
        inodes: Int,
        processes: [AppProcessStatus],
        stranded: [StrandedProcessStatus]? = nil,
        faults: [FaultRule]? = nil,
        hostChanges: String? = nil,
        cacheTimeout: Double? = nil
    ) {
        self.pid = pid
        self.mountpoint = mountpoint
        self.stateDirectory = stateDirectory
        self.openFiles = openFiles
        self.scopes = scopes
        self.scopeBudget = scopeBudget
        self.followsProcessEvents = followsProcessEvents
        self.attribution = attribution
        self.policyGeneration = policyGeneration
        self.policyFailure = policyFailure
        self.inodes = inodes
        self.processes = processes
        self.stranded = stranded
        self.faults = faults
        self.hostChanges = hostChanges
        self.cacheTimeout = cacheTimeout
    }
}

/// Kernel passthrough for the apps' container files in `scopefs status`
/// (issue 33): on, or off and why (the reads and writes then go through
/// the daemon, as for provider files).
public struct ContainerPassthroughStatus: Codable, Sendable, Equatable {
    public var on: Bool
    /// Why it is off (nil while on).
    public var reason: String?
    /// Container files open through it now.
    public var openFiles: Int
    /// Opens served by the daemon because their file could not be given
    /// to the kernel, and why the last one could not (nil: none).
    public var fallbacks: Int
    public var lastFallback: String?

    package init(on: Bool, reason: String?, openFiles: Int, fallbacks: Int, lastFallback: String?) {
        self.on = on
        self.reason = reason
        self.openFiles = openFiles
        self.fallbacks = fallbacks
        self.lastFallback = lastFallback
    }
}

/// The mount's FUSE transport in `scopefs status` (`scopefs mount --io-uring`).
public struct FuseTransportStatus: Codable, Sendable, Equatable {
    /// "io_uring" while the ring serves requests, else "/dev/fuse".
    public var transport: String
    /// Why it is not io_uring when the mount asked for it (nil otherwise).
    public var reason: String?
    public var queues: Int
    public var threads: Int
    /// Requests the ring delivered.
    public var served: UInt64

    package init(transport: String, reason: String?, queues: Int, threads: Int, served: UInt64) {
        self.transport = transport
        self.reason = reason
        self.queues = queues
        self.threads = threads
        self.served = served
    }
}

/// One extension provider in `scopefs status` (SPEC S41, S43).
public struct ProviderExtensionStatus: Codable, Sendable, Equatable {
    public var provider: String
    /// The built-in's name or the command.
    public var `extension`: String
    /// starting, running (NAME VERSION), restarting (...), failed: WHY, stopped.
    public var state: String
    public var items: Int
    public var cachedBytes: Int64
    public var quotaBytes: Int64?
    public var pinned: Int
    /// Items with local changes not uploaded yet.
    public var queued: Int
    public var uploading: String?
    public var conflicts: Int
    public var errors: Int
    /// Why the store cannot be reached, while it cannot.
    public var offline: String?
    public var lastError: String?

    package init(
        provider: String, extension: String, state: String, items: Int, cachedBytes: Int64, quotaBytes: Int64?,
        pinned: Int, queued: Int, uploading: String?, conflicts: Int, errors: Int, offline: String?,
        lastError: String?
    ) {
        self.provider = provider
        self.extension = `extension`
        self.state = state
        self.items = items
        self.cachedBytes = cachedBytes
        self.quotaBytes = quotaBytes
        self.pinned = pinned
        self.queued = queued
        self.uploading = uploading
        self.conflicts = conflicts
        self.errors = errors
        self.offline = offline
        self.lastError = lastError
    }
}

/// What `providerContent` does (`scopefs provider sync`, `pin`, `unpin`, `evict`).
public enum ContentAction: String, Codable, Sendable, CaseIterable {
    /// Pull the remote's changes and push the local ones now, and wait.
    case sync
    /// Download in full and keep downloaded.
    case pin
    case unpin
    /// Drop the downloaded content (it stays a placeholder).
    case evict
    /// Testing (issue 48): the remote changes the item (a new version of
    /// the same bytes) or deletes it, as a store edited elsewhere would
    /// (`scopefs fault remote-change`, `remote-delete`).
    case remoteChange, remoteDelete
    /// Start the extension again (a failed one too), without a remount.
    case restart
}
