import CommandErrors
import Control
import Foundation
import Glibc
import Policy
import PolicyStore
import Synchronization

/// File coordination across apps (issue 17, like NSFileCoordinator): a
/// process claims an item for reading or writing; writers exclude readers
/// and other writers of other processes; a writer that has to wait first
/// asks the holders' presenters to save and relinquish (a `save` notice
/// followed by a `relinquish` one), and
/// waits for them up to its timeout. Claims end with their process.
/// Uncoordinated access still works, as on Apple's systems.
///
/// The owner's `export` and `move` claim too (`claimForTransfer`), but an
/// app must not be able to stop the owner: after its wait the owner's
/// claim is taken anyway (`.overridden`), and it lasts at most
/// `ownerLease`, in case the owner's command dies without releasing it (the
/// process tracker follows app processes only; dead holders are dropped
/// when a waiter looks).
final class Coordinator: Sendable {
    enum Intent: String, Codable, Sendable {
        case read, write
    }

    enum Outcome: Sendable, Equatable {
        case granted(UInt64)
        case timedOut
        case tooMany
        /// `force`: the wait ended with these apps still holding claims; the
        /// claim was taken anyway.
        case overridden(UInt64, holders: [AppID])
        /// The fleet's store, which holds claims across hosts, could not
        /// be reached: no claim was taken.
        case unreachable(String)
    }

    /// How long an owner's claim can outlive a command that never released it.
    static let ownerLease: Double = 120
    /// How often a waiter looks again for holders that died.
    private static let recheck: Double = 0.5

    /// What a claim is on, the same for every app that names the item:
    /// the file itself and where it is. Two claims meet when they are on
    /// the same file — so a claim stays on its item when the item is
    /// renamed or moved on the host, as docs/API.md promises (issue 28
    /// finding 4) — or at the same place: a claim on a name where nothing
    /// is yet (a writer about to create it) and the file that appears
    /// there, or a claim whose file was deleted and a new one at its name.
    struct ItemKey: Equatable, Sendable {
        /// Device, inode and birth time; nil while nothing is at `location`.
        var identity: String?
        /// Provider items by provider and path, container items by app and path.
        var location: String

        func meets(_ other: ItemKey) -> Bool {
            (identity != nil && identity == other.identity) || location == other.location
        }
    }

    static func key(_ item: TransferItem, providers: [ProviderID: Provider], containers: String) -> ItemKey? {
        guard let path = RelativePath.normalize(item.path) else { return nil }
        let root: String?
        let location: String
        if let provider = item.provider {
            root = providers[provider]?.directory
            location = "p/\(provider)/\(path)"
        } else if let app = item.app {
            root = containers + "/" + app
            location = "c/\(app)/\(path)"
        } else {
            return nil
        }
        return ItemKey(identity: root.flatMap { HostFiles.identityKey(below: $0, path) }, location: location)
    }

    /// Claims one process may hold or wait for at once (a hostile app must
    /// not grow the table without bound).
    static let maximumPerProcess = 64

    private struct Claim {
        var id: UInt64
        var item: ItemKey
        var intent: Intent
        var pid: Int32
        var app: AppID
        /// The item's path in the app's view, as last known: the notices
        /// to its holder name it.
        var path: String
        /// Owner's claims only: when it ends by itself.
        var expires: Date?
    }

    private struct State {
        var nextID: UInt64 = 1
        var held: [UInt64: Claim] = [:]
        var waiting: [Int32: Int] = [:]
    }

    private let state = Mutex(State())
    private let changed = NSCondition()
    private let notices: NoticeBoard
    /// Claims across hosts when the policy is a fleet's (FleetCoordination.swift).
    private let fleet: FleetCoordination?

    /// The fleet's key of a provider item (`p/PROVIDER/PATH`): the same on
    /// every host for the same item. An extension's item is keyed by the
    /// extension's own identifier, which a remote rename keeps (decision 63).
    private let fleetKey: @Sendable (String) -> String

    init(
        notices: NoticeBoard, fleet: FleetCoordination? = nil,
        fleetKey: @escaping @Sendable (String) -> String = { $0 }
    ) {
        self.notices = notices
        self.fleet = fleet
        self.fleetKey = fleetKey
    }

    /// Waits until `pid` may read or write `item` (a provider-relative key
    /// the same for every app), telling holders in the way to relinquish:
    /// this host's processes first, then, for a provider item of a fleet,
    /// other hosts' within what is left of the same wait. The owner's
    /// forced claims stay on this host.
    func claim(
        _ item: ItemKey, _ intent: Intent, pid: Int32, app: AppID, path: String, timeout: Double, force: Bool = false,
        lease: Double? = nil
    ) -> Outcome {
        let deadline = Date().addingTimeInterval(timeout)
        let here = claimOnThisHost(
            item, intent, pid: pid, app: app, path: path, timeout: timeout, force: force, lease: lease)
        guard let fleet, !force, item.location.hasPrefix("p/"), case .granted(let id) = here else { return here }
        switch fleet.acquire(
            item: fleetKey(item.location), intent: intent, pid: pid, app: app, path: path, claim: id, until: deadline)
        {
        case .granted: return here
        case .timedOut:
            _ = release(id, pid: pid)
            return .timedOut
        case .unreachable(let why):
            _ = release(id, pid: pid)
            return .unreachable(why)
        }
    }

    private func claimOnThisHost(
        _ item: ItemKey, _ intent: Intent, pid: Int32, app: AppID, path: String, timeout: Double, force: Bool,
        lease: Double?
    ) -> Outcome {
        let admitted = state.withLock { state in
            let count = state.held.values.filter { $0.pid == pid }.count + state.waiting[pid, default: 0]
            guard count < Self.maximumPerProcess else { return false }
            state.waiting[pid, default: 0] += 1
            return true
        }
        guard admitted else { return .tooMany }
        defer { state.withLock { $0.waiting[pid, default: 1] -= 1 } }
        let deadline = Date().addingTimeInterval(timeout)
        var asked: Set<UInt64> = []
        changed.lock()
        defer { changed.unlock() }
        while true {
            let timedOut = Date() >= deadline
            let (granted, blockers) = state.withLock { state -> (UInt64?, [Claim]) in
                Self.dropEnded(&state)
                let blockers = state.held.values.filter {
                    $0.item.meets(item) && $0.pid != pid && (intent == .write || $0.intent == .write)
                }
                guard blockers.isEmpty || (force && timedOut) else { return (nil, blockers) }
                let id = state.nextID
                state.nextID += 1
                state.held[id] = Claim(
                    id: id, item: item, intent: intent, pid: pid, app: app, path: path,
                    expires: lease.map { Date().addingTimeInterval($0) })
                return (id, blockers)
            }
            if let granted {
                return blockers.isEmpty
                    ? .granted(granted) : .overridden(granted, holders: Array(Set(blockers.map(\.app))).sorted())
            }
            if timedOut { return .timedOut }
            // Ask each holder once: "save your changes", then "let go"
            // (savePresentedItemChanges, relinquishPresentedItem), together.
            for blocker in blockers where asked.insert(blocker.id).inserted && !blocker.app.isEmpty {
                notices.post(
                    [PresenterNotice.Kind.save, .relinquish].map {
                        PresenterNotice(kind: $0, app: blocker.app, grant: 0, provider: "", path: blocker.path)
                    })
            }
            _ = changed.wait(until: min(deadline, Date().addingTimeInterval(Self.recheck)))
        }
    }

    /// A claim on `item` is asked for at `path`: claims of the same item
    /// held at another path of the same provider (or container) whose old
    /// path no longer leads to the item — renamed or moved on the host —
    /// follow it to `path`. Their holders hear `moved`, unless `hearsMoves`
    /// says the app's grant on the item tells it already (SPEC S27a).
    /// `stillThere` tells a hard link (the old path still leads to the item)
    /// from a move.
    func follow(
        _ item: ItemKey, to path: String, place: (String) -> String?, stillThere: (String) -> Bool,
        hearsMoves: (AppID, _ oldPath: String) -> Bool
    ) {
        guard let identity = item.identity else { return }
        let moved = state.withLock { state -> [Claim] in
            let followed = state.held.values.filter {
                $0.item.identity == identity && $0.path != path && place($0.path) != nil
                    && place($0.path) == place(path) && !stillThere($0.path)
            }
            for claim in followed {
                state.held[claim.id]?.path = path
                state.held[claim.id]?.item.location = item.location
            }
            return followed
        }
        var told: Set<String> = []
        for claim in moved where !claim.app.isEmpty && !hearsMoves(claim.app, claim.path) {
            guard told.insert(claim.app + "\u{0}" + claim.path).inserted else { continue }
            notices.post(
                PresenterNotice(kind: .moved, app: claim.app, grant: 0, provider: "", path: path, oldPath: claim.path))
        }
    }

    /// Drops claims whose process is gone (the owner's commands are not
    /// tracked) or whose lease ran out.
    private static func dropEnded(_ state: inout State) {
        let now = Date()
        state.held = state.held.filter { _, claim in
            if let expires = claim.expires, expires <= now { return false }
            return kill(claim.pid, 0) == 0 || errno == EPERM
        }
    }

    /// Ends a claim of `pid`; false when it holds no such claim.
    func release(_ id: UInt64, pid: Int32) -> Bool {
        let released = state.withLock { state in
            guard state.held[id]?.pid == pid else { return false }
            state.held[id] = nil
            return true
        }
        if released {
            fleet?.release(claim: id)
            wakeWaiters()
        }
        return released
    }

    /// A process ended: its claims end with it.
    func processExited(pid: Int32) {
        fleet?.processExited(pid: pid)
        let any = state.withLock { state in
            let before = state.held.count
            state.held = state.held.filter { $0.value.pid != pid }
            return state.held.count != before
        }
        if any { wakeWaiters() }
    }

    private func wakeWaiters() {
        changed.lock()
        changed.broadcast()
        changed.unlock()
    }
}

/// The `coordinate` and `release` requests: the item is named by a path in
/// the app's view, and must be one the app's grants cover — an app cannot
/// block, or learn of, an item it was not given.
enum CoordinationHandling {
    static let longestWait: Double = 60

    /// `release` is both sides': an app ends its claim, the owner's
    /// transfer ends its own; a process releases only what it holds.
    static func handle(
        _ command: ControlCommand, from sender: AdmittedSender, coordinator: Coordinator, snapshot: PolicySnapshot,
        appRoot: String, containers: String
    ) -> ControlResponse {
        let pid = sender.pid
        if case .release(let claim) = command {
            guard coordinator.release(claim, pid: pid) else {
                return .failure(CommandError.Kind.unknown.rawValue, "this process holds no claim \(claim)")
            }
            return ControlResponse(ok: true)
        }
        guard case .coordinate(let raw, let intentName, let waitSeconds) = command, let app = sender.app,
            let intent = Coordinator.Intent(rawValue: intentName)
        else {
            return .failure(CommandError.Kind.usage.rawValue, "coordinate needs a path and an intent (read or write)")
        }
        let inApp = raw.hasPrefix(appRoot + "/") ? String(raw.dropFirst(appRoot.count + 1)) : raw
        guard let item = coordinatedItem(inApp, app: app, snapshot: snapshot),
            let key = Coordinator.key(item, providers: snapshot.providers, containers: containers)
        else {
            return .failure(CommandError.Kind.noInput.rawValue, "\(raw) is not a document this app was given")
        }
        if let normalized = RelativePath.normalize(inApp) {
            follow(key, to: normalized, app: app, snapshot: snapshot, containers: containers, coordinator: coordinator)
        }
        let wait = min(max(waitSeconds ?? 10, 0), longestWait)
        switch coordinator.claim(key, intent, pid: pid, app: app, path: inApp, timeout: wait) {
        case .granted(let claim):
            var response = ControlResponse(ok: true)
            response.claim = claim
            return response
        case .timedOut:
            return .failure(
                CommandError.Kind.timedOut.rawValue, "\(raw) is claimed by another app; gave up after \(Int(wait)) s")
        case .tooMany:
            return .failure(CommandError.Kind.timedOut.rawValue, "this process holds or waits for too many claims")
        case .unreachable(let why):
            return .failure(CommandError.Kind.ioError.rawValue, "\(raw) was not claimed: \(why)")
        case .overridden:
            preconditionFailure("an app's claim is never forced")
        }
    }

    /// Claims held on the same item at an older path follow it to
    /// `inApp` (a host rename, issue 28 finding 4). Provider paths are the
    /// same in every app's view; a container path only in its own app's.
    private static func follow(
        _ key: Coordinator.ItemKey, to inApp: String, app: AppID, snapshot: PolicySnapshot, containers: String,
        coordinator: Coordinator
    ) {
        func place(_ path: String) -> String? {
            if MountLayout.containerItem(inAppView: path) != nil { return "c/" + app }
            return MountLayout.providerItem(inAppView: path).map { "p/" + $0.provider }
        }
        coordinator.follow(
            key, to: inApp, place: place,
            stillThere: { old in
                let item =
                    MountLayout.containerItem(inAppView: old).map { TransferItem.container(app, $0) }
                    ?? MountLayout.providerItem(inAppView: old).map { TransferItem.provider($0.provider, $0.path) }
                let now = item.flatMap { Coordinator.key($0, providers: snapshot.providers, containers: containers) }
                return now?.identity == key.identity
            },
            hearsMoves: { holder, old in
                // A grant on the item itself tells its app of the move.
                [old, inApp].contains { path in
                    guard let (provider, item) = MountLayout.providerItem(inAppView: path),
                        case .granted(let grant) = snapshot.coverage(app: holder, provider: provider, path: item)
                    else { return false }
                    return grant.relativePath == item
                }
            })
    }

    /// A path in the app's view it may coordinate: an item its grants
    /// cover (`Providers/P/...`), or an item of its own container
    /// (`Container/...`, keyed by the app, so it meets no other app's).
    private static func coordinatedItem(_ inApp: String, app: AppID, snapshot: PolicySnapshot) -> TransferItem? {
        guard let path = RelativePath.normalize(inApp) else { return nil }
        if let item = MountLayout.containerItem(inAppView: path) { return .container(app, item) }
        guard let (provider, item) = MountLayout.providerItem(inAppView: path),
            case .granted = snapshot.coverage(app: app, provider: provider, path: item)
        else { return nil }
        return .provider(provider, item)
    }

    /// The owner's `claimForTransfer`: write claims on every item, in key
    /// order (two transfers never wait for each other crosswise), sharing
    /// one wait; what apps still hold after it is overridden and named.
    static let longestTransferWait: Double = 60

    static func claimForTransfer(
        _ items: [TransferItem], wait: Double?, pid: Int32, coordinator: Coordinator, snapshot: PolicySnapshot,
        containers: String
    ) -> ControlResponse {
        guard !items.isEmpty, items.count <= 16 else {
            return .failure(CommandError.Kind.usage.rawValue, "claimForTransfer needs 1 to 16 items")
        }
        var keyed: [(key: Coordinator.ItemKey, item: TransferItem)] = []
        for item in items {
            guard let key = Coordinator.key(item, providers: snapshot.providers, containers: containers) else {
                return .failure(CommandError.Kind.usage.rawValue, "bad item \(item.path)")
            }
            keyed.append((key, item))
        }
        let deadline = Date().addingTimeInterval(min(max(wait ?? 10, 0), longestTransferWait))
        var claims: [UInt64] = []
        var overridden: Set<AppID> = []
        for (key, item) in keyed.sorted(by: { $0.key.location < $1.key.location }) {
            let inApp =
                item.provider.map { MountLayout.providerPath(provider: $0, path: item.path) }
                ?? MountLayout.containerPath(item.path)
            switch coordinator.claim(
                key, .write, pid: pid, app: "", path: inApp, timeout: max(deadline.timeIntervalSinceNow, 0),
                force: true,
                lease: Coordinator.ownerLease)
            {
            case .granted(let claim): claims.append(claim)
            case .overridden(let claim, let holders):
                claims.append(claim)
                overridden.formUnion(holders)
            case .timedOut, .tooMany, .unreachable:
                for claim in claims { _ = coordinator.release(claim, pid: pid) }
                return .failure(CommandError.Kind.timedOut.rawValue, "this process holds or waits for too many claims")
            }
        }
        var response = ControlResponse(ok: true)
        response.claims = claims
        if !overridden.isEmpty {
            response.message =
                "went ahead although \(overridden.sorted().joined(separator: ", ")) still held a claim on it"
        }
        return response
    }
}
