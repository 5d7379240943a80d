import Foundation
import Policy
import PolicyStore
import Synchronization

/// File coordination across apps (issue 17, like NSFileCoordinator): a
/// process claims an item for reading or writing; writers exclude readers
/// and other writers of other processes; a writer that has to wait first
/// asks the holders' presenters to relinquish (a `relinquish` notice), and
/// waits for them up to its timeout. Claims end with their process.
/// Uncoordinated access still works, as on Apple's systems.
final class Coordinator: Sendable {
    enum Intent: String, Codable, Sendable {
        case read, write
    }

    enum Outcome: Sendable, Equatable {
        case granted(UInt64)
        case timedOut
        case tooMany
    }

    /// Claims one process may hold or wait for at once (a hostile app must
    /// not grow the table without bound).
    static let maximumPerProcess = 64

    private struct Claim {
        var id: UInt64
        var item: String
        var intent: Intent
        var pid: Int32
        var app: AppID
        var path: String
    }

    private struct State {
        var nextID: UInt64 = 1
        var held: [UInt64: Claim] = [:]
        var waiting: [Int32: Int] = [:]
    }

    private let state = Mutex(State())
    private let changed = NSCondition()
    private let notices: NoticeBoard

    init(notices: NoticeBoard) {
        self.notices = notices
    }

    /// Waits until `pid` may read or write `item` (a provider-relative key
    /// the same for every app), telling holders in the way to relinquish.
    func claim(_ item: String, _ intent: Intent, pid: Int32, app: AppID, path: String, timeout: Double) -> Outcome {
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
            let (granted, blockers) = state.withLock { state -> (UInt64?, [Claim]) in
                let blockers = state.held.values.filter {
                    $0.item == item && $0.pid != pid && (intent == .write || $0.intent == .write)
                }
                guard blockers.isEmpty else { return (nil, blockers) }
                let id = state.nextID
                state.nextID += 1
                state.held[id] = Claim(id: id, item: item, intent: intent, pid: pid, app: app, path: path)
                return (id, [])
            }
            if let granted { return .granted(granted) }
            // Ask each holder once: "save your changes and let go".
            for blocker in blockers where asked.insert(blocker.id).inserted {
                notices.post(DocumentNotice(kind: .relinquish, app: blocker.app, grant: 0, provider: "", path: blocker.path))
            }
            if !changed.wait(until: deadline) { return .timedOut }
        }
    }

    /// Ends a claim of `pid`; false when it holds no such claim.
    func release(_ id: UInt64, pid: Int32) -> Bool {
        let released = state.withLock { state in
            guard state.held[id]?.pid == pid else { return false }
            state.held[id] = nil
            return true
        }
        if released { wakeWaiters() }
        return released
    }

    /// A process ended: its claims end with it.
    func processExited(pid: Int32) {
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

    static func handle(
        _ request: ControlRequest, app: AppID, pid: Int32, coordinator: Coordinator, snapshot: PolicySnapshot,
        appRoot: String
    ) -> ControlResponse {
        if request.op == .release {
            guard let claim = request.claim else { return .failure(ScopeFSError.Kind.usage.rawValue, "release needs a claim") }
            guard coordinator.release(claim, pid: pid) else {
                return .failure(ScopeFSError.Kind.unknown.rawValue, "this process holds no claim \(claim)")
            }
            return ControlResponse(ok: true)
        }
        guard let raw = request.path, let intentName = request.intent, let intent = Coordinator.Intent(rawValue: intentName) else {
            return .failure(ScopeFSError.Kind.usage.rawValue, "coordinate needs a path and an intent (read or write)")
        }
        let inApp = raw.hasPrefix(appRoot + "/") ? String(raw.dropFirst(appRoot.count + 1)) : raw
        guard let (provider, path) = RelativePath.normalize(inApp).flatMap(MountLayout.providerItem(inAppView:)),
            case .granted = snapshot.coverage(app: app, provider: provider, path: path)
        else {
            return .failure(ScopeFSError.Kind.noInput.rawValue, "\(raw) is not a document this app was given")
        }
        let item = path.isEmpty ? provider : provider + "/" + path
        let wait = min(max(request.waitSeconds ?? 10, 0), longestWait)
        switch coordinator.claim(item, intent, pid: pid, app: app, path: inApp, timeout: wait) {
        case .granted(let claim):
            var response = ControlResponse(ok: true)
            response.claim = claim
            return response
        case .timedOut:
            return .failure(ScopeFSError.Kind.timedOut.rawValue, "\(raw) is claimed by another app; gave up after \(Int(wait)) s")
        case .tooMany:
            return .failure(ScopeFSError.Kind.timedOut.rawValue, "this process holds or waits for too many claims")
        }
    }
}
