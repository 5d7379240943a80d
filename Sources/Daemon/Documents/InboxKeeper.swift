import Documents
import Foundation
import Glibc
import HostText
import Policy
import PolicyStore
import Synchronization

/// Keeps imported copies in an app's inbox until the app has had them
/// (SPEC S18). A copy is removed when a process of the app that had it
/// exits: one that was running when the copy arrived, or one that listed
/// the inbox or opened the copy after it arrived. A run that never looked
/// (an unrelated short command) does not count. A copy nobody had goes
/// once it is older than `--inbox-days`. Apple leaves `Documents/Inbox` to
/// the app to empty; ScopeFS cleans up for apps that never do.
final class InboxKeeper: Sendable {
    private struct Waiting {
        var app: AppID
        /// The copy's path inside the app's container.
        var path: String
        /// The app's processes that had the copy.
        var witnesses: [ProcessKey]

        /// A process learned from a fork event has start time 0 until read.
        func had(_ process: ProcessKey) -> Bool {
            witnesses.contains {
                $0.pid == process.pid
                    && ($0.startTime == process.startTime || $0.startTime == 0 || process.startTime == 0)
            }
        }
    }

    private let state: StateDirectory
    private let maximumAge: TimeInterval
    private let waiting = Mutex<[Waiting]>([])
    /// Apps whose inbox holds copies, and how many: while none does, the
    /// gate skips reporting container reads (a path walk and a table lock
    /// per open) — the usual case.
    private let appsWithCopies = Mutex<Set<AppID>>([])
    private let appsWithCopiesCount = Atomic<Int>(0)

    /// Whether container reads can matter to any inbox now.
    var followsReads: Bool { appsWithCopiesCount.load(ordering: .relaxed) > 0 }

    private func noteInbox(of app: AppID, holdsCopies: Bool) {
        appsWithCopies.withLock { apps in
            if holdsCopies { apps.insert(app) } else { apps.remove(app) }
            appsWithCopiesCount.store(apps.count, ordering: .relaxed)
        }
    }

    init(state: StateDirectory, days: Int) {
        self.state = state
        self.maximumAge = TimeInterval(days) * 86_400
    }

    /// Notes copies just imported for `app`, with the app's processes that
    /// were running then: they have the copies.
    func imported(app: AppID, paths: [String], running: [ProcessKey]) {
        if !paths.isEmpty { noteInbox(of: app, holdsCopies: true) }
        for path in paths {
            guard let copy = copyPath(app: app, containerPath: path) else { continue }
            witness(app: app, copies: [copy], by: running)
        }
    }

    /// A process of `app` opened an item of its container for reading: the
    /// inbox folder (it has every copy listed there) or one copy.
    func read(app: AppID, process: ProcessKey, path: String) {
        let inbox = MountLayout.inbox(of: app)
        if path == inbox {
            let names = ContainerFiles.names(root: state.containerPath(of: app), relative: inbox)
            witness(app: app, copies: names.map { inbox + "/" + $0 }, by: [process])
        } else if let copy = copyPath(app: app, containerPath: path) {
            witness(app: app, copies: [copy], by: [process])
        }
    }

    /// The copy (first level of the inbox) that a container path is in, if any.
    private func copyPath(app: AppID, containerPath: String) -> String? {
        let inbox = MountLayout.inbox(of: app) + "/"
        // By bytes (SPEC S33a): String's prefix and == compare canonically.
        guard containerPath.hasHostPrefix(inbox), let normalized = RelativePath.normalize(containerPath),
            normalized.sameHostName(as: containerPath)
        else { return nil }
        guard let name = RelativePath.components(of: String(containerPath.utf8.dropFirst(inbox.utf8.count))!).first
        else { return nil }
        return inbox + name
    }

    private func witness(app: AppID, copies: [String], by processes: [ProcessKey]) {
        guard !processes.isEmpty else { return }
        waiting.withLock { waiting in
            for copy in copies {
                if let index = waiting.firstIndex(where: { $0.app == app && $0.path == copy }) {
                    for process in processes where !waiting[index].had(process) {
                        waiting[index].witnesses.append(process)
                    }
                } else {
                    waiting.append(Waiting(app: app, path: copy, witnesses: processes))
                }
            }
        }
    }

    /// An app process exited: removes the copies it had. Returns the
    /// container paths removed (their cached entries must go), by app.
    func processExited(_ process: ProcessKey) -> [AppID: [String]] {
        let due = waiting.withLock { waiting -> [Waiting] in
            let due = waiting.filter { $0.had(process) }
            waiting.removeAll { $0.had(process) }
            return due
        }
        var removed: [AppID: [String]] = [:]
        for copy in due where remove(copy.path, of: copy.app) { removed[copy.app, default: []].append(copy.path) }
        return removed
    }

    /// Removes copies older than the limit from every app's inbox (by their
    /// change time: the import, or the app's own last change). Returns the
    /// container paths removed, by app.
    func removeExpired(apps: [AppID], now: Date = Date()) -> [AppID: [String]] {
        var removed: [AppID: [String]] = [:]
        for app in apps {
            let container = state.containerPath(of: app)
            let inbox = MountLayout.inbox(of: app)
            for name in ContainerFiles.names(root: container, relative: inbox) {
                guard let info = ContainerFiles.status(root: container, relative: inbox, name: name) else { continue }
                let changed = Double(info.st_ctim.tv_sec) + Double(info.st_ctim.tv_nsec) / 1e9
                guard now.timeIntervalSince1970 - changed >= maximumAge else { continue }
                let path = MountLayout.inbox(of: app) + "/" + name
                if remove(path, of: app) { removed[app, default: []].append(path) }
            }
            // Copies an earlier daemon imported count as well.
            noteInbox(of: app, holdsCopies: !ContainerFiles.names(root: container, relative: inbox).isEmpty)
        }
        return removed
    }

    /// Removes one copy, and the inbox once it is empty. Never through a
    /// link: the app may have replaced its inbox with one (`ContainerFiles`).
    private func remove(_ path: String, of app: AppID) -> Bool {
        waiting.withLock { waiting in waiting.removeAll { $0.app == app && $0.path == path } }
        let container = state.containerPath(of: app)
        guard ContainerFiles.remove(root: container, relative: path) else { return false }
        let inbox = MountLayout.inbox(of: app)
        ContainerFiles.removeEmptyFolder(root: container, relative: inbox)
        if ContainerFiles.names(root: container, relative: inbox).isEmpty { noteInbox(of: app, holdsCopies: false) }
        return true
    }
}
