import CommandErrors
import Documents
import Foundation
import Logging
import Policy
import PolicyStore
import ScopeFS
import Synchronization
import SystemPackage

/// Serves the file system's document needs (item identifiers, bookmarks)
/// and keeps item locations current: a background pass re-locates items by
/// file identity every second, or at once after a rename through the mount.
final class DocumentBridge: DocumentServices {
    private let repository: any IsolationStore
    private let bookmarks: BookmarkService
    /// Nil on a fleet's store: items move there only by the owner's role.
    private let locator: ItemLocator?
    private let logger: Logger
    private let wake = DispatchSemaphore(value: 0)
    /// Set while a wake-up is pending: a burst of renames (on the host, or
    /// an app's through the mount) costs one pass, not one each.
    private let wakePending = Atomic<Bool>(false)
    /// Items an atomic save replaced through the mount (SPEC S48), for the
    /// next pass to record before it looks for moved items: otherwise it
    /// would take the replaced file for a lost item.
    private let replaced = Mutex<[(ProviderID, String)]>([])
    private let inbox: InboxKeeper
    private let events: any EventSink
    let contentNotices: ContentNotices
    let subitemNotices: SubitemNotices
    private let board: NoticeBoard

    init(
        state: StateDirectory, repository: any IsolationStore, locator: ItemLocator?, inbox: InboxKeeper,
        events: any EventSink, logger: Logger, notices: NoticeBoard
    ) throws(CommandError) {
        self.contentNotices = ContentNotices(board: notices)
        self.subitemNotices = SubitemNotices(board: notices)
        self.board = notices
        self.inbox = inbox
        self.events = events
        self.repository = repository
        self.bookmarks = BookmarkService(codec: try BookmarkCodec(state: state), repository: repository)
        self.locator = locator
        self.logger = logger
    }

    func itemIdentifier(provider: ProviderID, path: String) throws(Errno) -> ItemIdentifier {
        do { return try repository.itemIdentifier(provider: provider, path: path) } catch { throw errno(error) }
    }

    func bookmark(app: AppID, provider: ProviderID, path: String, access: Access) throws(Errno) -> String {
        do { return try bookmarks.create(app: app, provider: provider, path: path, access: access) } catch {
            throw errno(error)
        }
    }

    func itemsMayHaveMoved() {
        if !wakePending.exchange(true, ordering: .acquiringAndReleasing) { wake.signal() }
    }

    func itemReplaced(provider: ProviderID, path: String) {
        replaced.withLock { $0.append((provider, path)) }
        itemsMayHaveMoved()
    }

    var followsContainerReads: Bool { inbox.followsReads }
    var presentersListen: Bool { board.anyoneListened }

    func containerItemRead(app: AppID, process: ProcessKey, path: String) {
        inbox.read(app: app, process: process, path: path)
    }

    func contentWritten(by app: AppID, provider: ProviderID, path: String, in snapshot: PolicySnapshot) {
        contentNotices.changed(provider: provider, path: path, writer: app, in: snapshot)
    }

    func subitemWillChange(provider: ProviderID, _ change: SubitemChange) {
        subitemNotices.willChange(provider: provider, change)
    }

    func subitemDidNotChange(provider: ProviderID, _ change: SubitemChange) {
        subitemNotices.didNotChange(provider: provider, change)
    }

    func subitemChanged(by app: AppID, provider: ProviderID, _ change: SubitemChange, in snapshot: PolicySnapshot) {
        subitemNotices.changed(by: app, provider: provider, change, in: snapshot)
    }

    /// Whether items move by the daemon's own finding (a local store): a
    /// fleet's items are recorded only by the owner's role.
    var locatesItems: Bool { locator != nil }

    /// Brings the store's item locations up to date before `token`'s
    /// resolution when its item has left its recorded path; true when any
    /// moved (the served policy must then be read again). An app's request
    /// costs one row and one lstat unless its own item moved.
    func relocateItems(before token: String) throws(CommandError) -> Bool {
        guard let locator, let item = try? bookmarks.codec.decode(token).item, try locator.hasMoved(item) else {
            return false
        }
        return try locator.refresh()
    }

    /// Resolves a bookmark for a process of `app` against the served
    /// policy; a stale resolution is recorded, so a test can tell that the
    /// app met one.
    func resolve(_ token: String, by app: AppID, pid: Int32, in snapshot: PolicySnapshot) throws(CommandError)
        -> BookmarkResolution
    {
        let resolution = try bookmarks.resolve(token, by: app, in: snapshot)
        if resolution.isStale {
            events.record(
                Event(
                    time: Date().timeIntervalSince1970, kind: .staleBookmark, app: app, pid: pid,
                    path: "/\(app)/\(resolution.pathInApp)", operation: "resolve"))
        }
        return resolution
    }

    private func errno(_ error: CommandError) -> Errno {
        logger.warning("document service: \(error.message)")
        return error.kind == .noInput ? .noSuchFileOrDirectory : .ioError
    }

    /// Re-locates items until `stop`; calls `changed` when any moved.
    func followItemLocations(until stop: @Sendable () -> Bool, changed: () -> Void) {
        guard let locator else { return }
        while !stop() {
            _ = wake.wait(timeout: .now() + DaemonTunables.itemLocatorPeriodSeconds)
            wakePending.store(false, ordering: .releasing)
            do {
                var adopted = false
                let saves = replaced.withLock { list in
                    defer { list = [] }
                    return list
                }
                for (provider, path) in saves {
                    adopted = try locator.repository.adoptFile(provider: provider, path: path) || adopted
                }
                if try locator.refresh() || adopted { changed() }
            } catch {
                logger.error("item locations: \(error)")
            }
        }
    }
}
