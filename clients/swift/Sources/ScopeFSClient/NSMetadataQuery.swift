#if !canImport(Darwin)
    import Foundation

    // Apple's NSMetadataQuery names (issue 31), over `MetadataQuery` (the
    // daemon's live query, SPEC S28a). Linux Foundation has none; on Apple's
    // systems Foundation's own are used and these do not exist.

    /// The app's own documents (`scopefs query --scope documents`).
    public let NSMetadataQueryUbiquitousDocumentsScope = "NSMetadataQueryUbiquitousDocumentsScope"
    /// The documents its references point at (`--scope external`).
    public let NSMetadataQueryAccessibleUbiquitousExternalDocumentsScope =
        "NSMetadataQueryAccessibleUbiquitousExternalDocumentsScope"

    /// The document's URL (for a reference: the original, in the app's view).
    public let NSMetadataItemURLKey = "kMDItemURL"
    public let NSMetadataItemPathKey = "kMDItemPath"
    public let NSMetadataItemFSNameKey = "kMDItemFSName"
    public let NSMetadataItemDisplayNameKey = "kMDItemDisplayName"
    /// Not Apple's: where the document lives in the container.
    public let NSMetadataItemURLInLocalContainerKey = "scopefsURLInLocalContainer"
    public let NSMetadataUbiquitousItemContainerDisplayNameKey = "NSMetadataUbiquitousItemContainerDisplayNameKey"
    public let NSMetadataUbiquitousItemIsExternalDocumentKey = "NSMetadataUbiquitousItemIsExternalDocumentKey"

    /// `NSMetadataQueryDidUpdate`'s userInfo: arrays of `NSMetadataItem`.
    public let NSMetadataQueryUpdateAddedItemsKey = "kMDQueryUpdateAddedItems"
    public let NSMetadataQueryUpdateChangedItemsKey = "kMDQueryUpdateChangedItems"
    public let NSMetadataQueryUpdateRemovedItemsKey = "kMDQueryUpdateRemovedItems"

    extension Notification.Name {
        public static let NSMetadataQueryDidStartGathering = Notification.Name(
            "NSMetadataQueryDidStartGatheringNotification")
        public static let NSMetadataQueryGatheringProgress = Notification.Name(
            "NSMetadataQueryGatheringProgressNotification")
        public static let NSMetadataQueryDidFinishGathering = Notification.Name(
            "NSMetadataQueryDidFinishGatheringNotification")
        public static let NSMetadataQueryDidUpdate = Notification.Name("NSMetadataQueryDidUpdateNotification")
    }

    /// One document of a query's results, read by attribute as on Apple's
    /// systems: `value(forAttribute: NSMetadataItemURLKey) as? URL`.
    open class NSMetadataItem: NSObject, @unchecked Sendable {
        public let item: MetadataQuery.Item

        init(_ item: MetadataQuery.Item) {
            self.item = item
        }

        open var attributes: [String] {
            [
                NSMetadataItemURLKey, NSMetadataItemPathKey, NSMetadataItemFSNameKey, NSMetadataItemDisplayNameKey,
                NSMetadataItemURLInLocalContainerKey, NSMetadataUbiquitousItemContainerDisplayNameKey,
                NSMetadataUbiquitousItemIsExternalDocumentKey,
            ]
        }

        open func value(forAttribute key: String) -> Any? {
            switch key {
            case NSMetadataItemURLKey: item.url
            case NSMetadataItemPathKey: item.url.path
            case NSMetadataItemFSNameKey, NSMetadataItemDisplayNameKey: item.url.lastPathComponent
            case NSMetadataItemURLInLocalContainerKey: item.urlInLocalContainer
            case NSMetadataUbiquitousItemContainerDisplayNameKey: item.containerDisplayName
            case NSMetadataUbiquitousItemIsExternalDocumentKey: item.isExternalDocument
            default: nil
            }
        }
    }

    /// Apple's `NSMetadataQuery` over the app's documents: `start()` gathers
    /// (`NSMetadataQueryDidStartGathering`, then `...DidFinishGathering`),
    /// then posts `NSMetadataQueryDidUpdate` with the added, changed and
    /// removed items as documents come and go, on `operationQueue` (nil:
    /// the main queue, which the app's run loop must serve, as on Apple's
    /// systems). `searchScopes` takes the two ubiquitous scopes (both or
    /// none: every document). `predicate` is evaluated on each item: Linux
    /// Foundation has only block predicates (`NSPredicate { item, _ in }`),
    /// no predicate strings.
    open class NSMetadataQuery: NSObject, @unchecked Sendable {
        open var searchScopes: [Any] = []
        open var predicate: NSPredicate?
        open var operationQueue: OperationQueue?
        /// Not Apple's: the state directory (nil: `$SCOPEFS_STATE`).
        open var stateDirectory: String?

        private let lock = NSLock()
        private var items: [NSMetadataItem] = []
        private var started = false
        private var stopped = false
        private var gathering = false
        private var updatesDisabled = 0
        private var held: (added: [NSMetadataItem], changed: [NSMetadataItem], removed: [NSMetadataItem]) = ([], [], [])

        public override init() {}

        open var isStarted: Bool { locked { started } }
        open var isGathering: Bool { locked { gathering } }
        open var isStopped: Bool { locked { stopped } }
        open var resultCount: Int { locked { items.count } }
        open var results: [Any] { locked { items } }
        open func result(at index: Int) -> Any { locked { items[index] } }

        /// Starts gathering on a thread of its own; false when already started.
        @discardableResult
        open func start() -> Bool {
            let go = locked { () -> Bool in
                guard !started else { return false }
                (started, stopped, gathering) = (true, false, true)
                return true
            }
            guard go else { return false }
            let query = MetadataQuery(searchScope: scope, stateDirectory: stateDirectory)
            Thread.detachNewThread { [self] in run(query) }
            return true
        }

        open func stop() { locked { stopped = true } }
        open func disableUpdates() { locked { updatesDisabled += 1 } }
        open func enableUpdates() {
            let release = locked { () -> Bool in
                updatesDisabled = max(0, updatesDisabled - 1)
                return updatesDisabled == 0
            }
            if release { postHeld() }
        }

        private var scope: MetadataQuery.SearchScope {
            let scopes = Set(searchScopes.compactMap { $0 as? String })
            let documents = scopes.contains(NSMetadataQueryUbiquitousDocumentsScope)
            let external = scopes.contains(NSMetadataQueryAccessibleUbiquitousExternalDocumentsScope)
            return documents == external ? .all : documents ? .documents : .external
        }

        private func run(_ query: MetadataQuery) {
            post(.NSMetadataQueryDidStartGathering)
            let first = (try? query.start()) ?? []
            locked {
                items = first.map(NSMetadataItem.init).filter(matches)
                gathering = false
            }
            post(.NSMetadataQueryDidFinishGathering)
            while !locked({ stopped }) {
                guard let event = try? query.next(timeout: 1) else { continue }
                locked {
                    switch event {
                    case .finishedGathering: break
                    case .added(let item):
                        let found = NSMetadataItem(item)
                        guard matches(found) else { return }
                        items.append(found)
                        held.added.append(found)
                    case .changed(let item):
                        let found = NSMetadataItem(item)
                        guard
                            let index = items.firstIndex(where: {
                                $0.item.urlInLocalContainer == item.urlInLocalContainer
                            })
                        else { return }
                        items[index] = found
                        held.changed.append(found)
                    case .removed(let item):
                        guard
                            let index = items.firstIndex(where: {
                                $0.item.urlInLocalContainer == item.urlInLocalContainer
                            })
                        else { return }
                        held.removed.append(items.remove(at: index))
                    }
                }
                if locked({ updatesDisabled == 0 }) { postHeld() }
            }
        }

        private func matches(_ item: NSMetadataItem) -> Bool { predicate?.evaluate(with: item) ?? true }

        private func postHeld() {
            let update = locked { () -> [String: [NSMetadataItem]]? in
                defer { held = ([], [], []) }
                guard !(held.added.isEmpty && held.changed.isEmpty && held.removed.isEmpty) else { return nil }
                return [
                    NSMetadataQueryUpdateAddedItemsKey: held.added,
                    NSMetadataQueryUpdateChangedItemsKey: held.changed,
                    NSMetadataQueryUpdateRemovedItemsKey: held.removed,
                ]
            }
            if let update { post(.NSMetadataQueryDidUpdate, userInfo: update) }
        }

        private func post(_ name: Notification.Name, userInfo: [String: [NSMetadataItem]]? = nil) {
            let notification = UncheckedNotification(
                value: Notification(name: name, object: self, userInfo: userInfo))
            (operationQueue ?? .main).addOperation { NotificationCenter.default.post(notification.value) }
        }

        private struct UncheckedNotification: @unchecked Sendable {
            let value: Notification
        }

        private func locked<T>(_ body: () throws -> T) rethrows -> T {
            lock.lock()
            defer { lock.unlock() }
            return try body()
        }
    }
#endif
