import Dispatch
import Glibc
import HostText
import Policy
import Synchronization

/// Notices for items inside granted folders (issue 31, SPEC S27c; Apple's
/// `presentedSubitemDidAppear`, `presentedSubitem(at:didMoveTo:)` and
/// `accommodatePresentedSubitemDeletion`): a name that came, went or moved
/// in a provider, on the host (the host-change channel) or through an
/// app's create, link, unlink or rename on the mount.
///
/// Each app whose active folder grant holds the item hears it, with the
/// item's path in its own view; an item is told as `moved` to an app that
/// sees both its old and new place, as `appeared` to one that sees only
/// the new, as `deleted` to one that sees only the old, and not at all to
/// one that sees neither (a sibling of its grant, a revoked grant, another
/// app's grant). The granted item itself is not a subitem: its moves and
/// deletion are the grant's own notices. The app that made a change
/// through the mount is not told of it (as `changed`).
///
/// inotify cannot tell who made a change: the mount's own changes come
/// back from the host as echoes. Each change an app makes is expected
/// before its system call; the host's report of it is dropped when it
/// comes (or forgotten after `echoLifetime`).
final class SubitemNotices: Sendable {
    /// An echo normally uses its expectation up when it comes; the
    /// lifetime only bounds one whose echo never comes (a folder not yet
    /// watched), which would swallow the host's own change of that name
    /// meanwhile. It is long because the clock runs until the channel's
    /// thread reads the echo, and on a loaded machine that took over 2 s
    /// (a CI run: the writing app was told of its own change).
    static let echoLifetime: Double = 10
    /// Echoes kept at most; the oldest go first (SPEC S40).
    private static let echoesKept = 4096

    private typealias Echo = EchoExpectations.Echo

    private let board: NoticeBoard
    private let queue = DispatchQueue(label: "scopefs.subitem-notices")
    private let expected = Mutex(EchoExpectations(lifetime: echoLifetime, capacity: echoesKept))
    /// Set when the channel cannot tell the daemon's own changes (inotify).
    let expectsEchoes = Atomic<Bool>(false)

    init(board: NoticeBoard) {
        self.board = board
    }

    // MARK: Through the mount (FUSE workers: only queue)

    /// `change` is about to be made through the mount: its host echo is
    /// expected.
    func willChange(provider: ProviderID, _ change: SubitemChange) {
        guard expectsEchoes.load(ordering: .relaxed) else { return }
        let now = Self.now()
        expected.withLock { expected in
            for echo in Self.echoes(provider, change) { expected.expect(echo, now: now) }
        }
    }

    /// The change `willChange` announced failed: no echo comes. Without
    /// this an app's failing calls could plant expectations that swallow
    /// the host's real changes of those names (for other apps' presenters).
    func didNotChange(provider: ProviderID, _ change: SubitemChange) {
        guard expectsEchoes.load(ordering: .relaxed) else { return }
        expected.withLock { expected in
            for echo in Self.echoes(provider, change) { expected.forget(echo) }
        }
    }

    /// A process of `writer` made `change` through the mount.
    func changed(by writer: AppID, provider: ProviderID, _ change: SubitemChange, in snapshot: PolicySnapshot) {
        queue.async { [board] in
            board.post(Self.notices(provider, change, except: writer, in: snapshot))
        }
    }

    // MARK: On the host (the channel's thread)

    /// The host reported `change`: told unless it is the echo of an app's.
    func hostChanged(provider: ProviderID, _ change: SubitemChange, in snapshot: PolicySnapshot) {
        if expectsEchoes.load(ordering: .relaxed), isEcho(provider, change) { return }
        board.post(Self.notices(provider, change, except: nil, in: snapshot))
    }

    /// Whether every name of `change` was expected; those are used up.
    private func isEcho(_ provider: ProviderID, _ change: SubitemChange) -> Bool {
        let echoes = Self.echoes(provider, change)
        let now = Self.now()
        return expected.withLock { $0.useUp(echoes, now: now) }
    }

    private static func echoes(_ provider: ProviderID, _ change: SubitemChange) -> [Echo] {
        switch change {
        case .appeared(let path): [Echo(provider: provider, path: path, came: true)]
        case .deleted(let path): [Echo(provider: provider, path: path, came: false)]
        case .moved(let from, let to):
            [Echo(provider: provider, path: from, came: false), Echo(provider: provider, path: to, came: true)]
        }
    }

    // MARK: Who hears what

    /// The notices `change` makes, one per app that sees it (apps in order).
    static func notices(
        _ provider: ProviderID, _ change: SubitemChange, except writer: AppID?, in snapshot: PolicySnapshot
    ) -> [PresenterNotice] {
        let apps = snapshot.apps(withGrantsIn: provider)
        var notices: [PresenterNotice] = []
        for app in apps.sorted() where app != writer {
            func inside(_ path: String) -> Grant? { grantHolding(path, app: app, provider: provider, in: snapshot) }
            func notice(_ kind: PresenterNotice.Kind, _ grant: Grant, _ path: String, oldPath: String? = nil)
                -> PresenterNotice
            {
                PresenterNotice(
                    kind: kind, app: app, grant: grant.id, provider: provider,
                    path: MountLayout.providerPath(provider: provider, path: path),
                    oldPath: oldPath.map { MountLayout.providerPath(provider: provider, path: $0) }, subitem: true)
            }
            switch change {
            case .appeared(let path):
                if let grant = inside(path) { notices.append(notice(.appeared, grant, path)) }
            case .deleted(let path):
                if let grant = inside(path) { notices.append(notice(.deleted, grant, path)) }
            case .moved(let from, let to):
                switch (inside(from), inside(to)) {
                case (.some, .some(let grant)): notices.append(notice(.moved, grant, to, oldPath: from))
                case (nil, .some(let grant)): notices.append(notice(.appeared, grant, to))
                case (.some(let grant), nil): notices.append(notice(.deleted, grant, from))
                case (nil, nil): break
                }
            }
        }
        return notices
    }

    /// The app's active grant of a folder that holds the item at `path`
    /// (below the grant's own item, at any depth); nil when the app cannot
    /// see the item there: not granted, revoked, the granted item itself,
    /// or a staging file of an atomic copy (never shown, SPEC S19).
    private static func grantHolding(_ path: String, app: AppID, provider: ProviderID, in snapshot: PolicySnapshot)
        -> Grant?
    {
        guard !path.split(separator: "/").contains(where: { StagingNames.isStaging(String($0)) }) else { return nil }
        let position = snapshot.position(app: app, provider: provider, path: path)
        guard case .granted(let grant) = position.coverage, grant.state == .active, !position.grantIsHere else {
            return nil
        }
        return grant
    }

    private static func now() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }
}
