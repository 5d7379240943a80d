import Foundation
import Policy
import Synchronization

/// The notices presenters wait for (issue 17): each installed snapshot's
/// changes, numbered, kept in a bounded window per app so a slow or absent
/// app costs nothing but its window, and one app's many changes (a folder
/// of thousands of files made through the mount, issue 31) push out only
/// the notices of the apps that share that folder, never another app's
/// (S40). An app sees only its own app's notices.
final class NoticeBoard: Sendable {
    static let window = 4096

    private struct State {
        var lastID: UInt64 = 0
        var notices: [AppID: [PresenterNotice]] = [:]
    }

    private let state = Mutex(State())
    private let posted = NSCondition()
    /// Set by the first `notices(for:)`, never cleared: a presenter's first
    /// watch only subscribes (from now on), so nothing before it is owed.
    private let listened = Atomic<Bool>(false)
    var anyoneListened: Bool { listened.load(ordering: .relaxed) }

    /// Numbers and keeps the changes from `old` to `new`.
    func post(from old: PolicySnapshot, to new: PolicySnapshot) {
        post(PresenterNotice.changes(from: old, to: new))
    }

    func post(_ notice: PresenterNotice) { post([notice]) }

    /// Posts `changes` in this order, with no other notice between them.
    func post(_ changes: [PresenterNotice]) {
        guard !changes.isEmpty else { return }
        state.withLock { state in
            for var notice in changes {
                state.lastID += 1
                notice.id = state.lastID
                state.notices[notice.app, default: []].append(notice)
            }
            for app in Set(changes.map(\.app)) {
                let count = state.notices[app]?.count ?? 0
                if count > Self.window { state.notices[app]?.removeFirst(count - Self.window) }
            }
        }
        posted.lock()
        posted.broadcast()
        posted.unlock()
    }

    /// `app`'s notices after `cursor` (none: from now on), waiting up to
    /// `wait` seconds for one; and the cursor to ask from next.
    func notices(for app: AppID, after cursor: UInt64?, wait: Double) -> (notices: [PresenterNotice], cursor: UInt64) {
        if !listened.load(ordering: .relaxed) { listened.store(true, ordering: .relaxed) }
        let deadline = Date().addingTimeInterval(wait)
        posted.lock()
        defer { posted.unlock() }
        while true {
            let (found, last) = state.withLock { state in
                let after = cursor ?? state.lastID
                let mine = state.notices[app] ?? []
                // Newest last: only the tail after the cursor is copied.
                let start = mine.lastIndex { $0.id <= after }.map { $0 + 1 } ?? mine.startIndex
                return (Array(mine[start...]), state.lastID)
            }
            guard let cursor else { return ([], last) }  // subscribing: from now on
            if let newest = found.last { return (found, newest.id) }
            if !posted.wait(until: deadline) { return ([], cursor) }
        }
    }
}
