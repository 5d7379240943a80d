import Dispatch
import Glibc
import Policy
import Synchronization

/// "Content changed" notices (issue 17, `presentedItemDidChange`): a
/// provider item's content changed on the host (the host-change channel)
/// or through an app's write on the mount (after the writer closes it).
/// Every app whose active grant covers the item hears it, with the item's
/// own path (a file inside a granted folder too), except the app that wrote
/// it through the mount.
///
/// A burst costs one notice per item and writer every `interval`: the first
/// change is posted at once, later ones within the interval are folded into
/// one posted when it ends, so the last change is always told.
final class ContentNotices: Sendable {
    static let interval: Double = 0.1
    /// Items remembered for folding; older ones are dropped first.
    private static let remembered = 1024

    private struct Key: Hashable {
        var provider: ProviderID
        var path: String
        /// The app that wrote through the mount (it is not told); nil: the host.
        var writer: AppID?
        /// `changed`, or `state` for an extension item's state (S42).
        var kind: PresenterNotice.Kind
    }

    private struct State {
        /// When each item's last notice was posted (monotonic seconds).
        var posted: [Key: Double] = [:]
        /// Items with a notice due at the end of their interval, with the
        /// newest snapshot to read the apps from.
        var due: [Key: PolicySnapshot] = [:]
    }

    private enum Action {
        case post
        case postLater(Double)
        case nothing
    }

    private let board: NoticeBoard
    private let state = Mutex(State())
    private let timer = DispatchQueue(label: "scopefs.content-notices")

    init(board: NoticeBoard) {
        self.board = board
    }

    /// The content of `path` of `provider` changed; `writer`: the app
    /// that wrote it through the mount. Only queues: the apps are worked
    /// out on a queue of its own, in order.
    func changed(
        provider: ProviderID, path: String, writer: AppID?, in snapshot: PolicySnapshot,
        kind: PresenterNotice.Kind = .changed
    ) {
        let key = Key(provider: provider, path: path, writer: writer, kind: kind)
        let now = Self.now()
        let action = state.withLock { state -> Action in
            if state.due[key] != nil {
                state.due[key] = snapshot
                return .nothing
            }
            if let last = state.posted[key], now - last < Self.interval {
                state.due[key] = snapshot
                return .postLater(last + Self.interval - now)
            }
            if state.posted.count >= Self.remembered {
                state.posted = state.posted.filter { now - $0.value < Self.interval }
            }
            state.posted[key] = now
            return .post
        }
        switch action {
        case .post:
            // Off the caller's thread: a FUSE worker (a release) only queues.
            timer.async { [self] in board.post(Self.notices(key, snapshot)) }
        case .postLater(let delay):
            timer.asyncAfter(deadline: .now() + delay) { [self] in
                let snapshot = state.withLock { state in
                    state.posted[key] = Self.now()
                    return state.due.removeValue(forKey: key)
                }
                if let snapshot { board.post(Self.notices(key, snapshot)) }
            }
        case .nothing:
            break
        }
    }

    /// Host changes were lost (the channel's queue overflowed): which
    /// items changed is not known, so each active grant's item is told
    /// `changed` (a folder's: something in it may have), folded as any
    /// change is. A notice too many makes an app read again; one missing
    /// leaves it showing stale content.
    func mayAllHaveChanged(in snapshot: PolicySnapshot) {
        var told = Set<Key>()
        for grant in snapshot.grantsByID.values where grant.state == .active {
            let key = Key(provider: grant.provider, path: grant.relativePath, writer: nil, kind: .changed)
            if told.insert(key).inserted { changed(provider: key.provider, path: key.path, writer: nil, in: snapshot) }
        }
    }

    /// One notice per app whose active grant covers the item.
    private static func notices(_ key: Key, _ snapshot: PolicySnapshot) -> [PresenterNotice] {
        let apps = snapshot.apps(withGrantsIn: key.provider)
        var notices: [PresenterNotice] = []
        for app in apps.sorted() where app != key.writer {
            let position = snapshot.position(app: app, provider: key.provider, path: key.path)
            guard case .granted(let grant) = position.coverage, grant.state == .active else { continue }
            notices.append(
                PresenterNotice(
                    kind: key.kind, app: app, grant: grant.id, provider: key.provider,
                    path: MountLayout.providerPath(provider: key.provider, path: key.path),
                    subitem: position.grantIsHere ? nil : true))
        }
        return notices
    }

    private static func now() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }
}
