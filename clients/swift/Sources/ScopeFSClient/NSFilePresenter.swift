#if !canImport(Darwin)
    import Foundation

    /// Apple's `NSFilePresenter`, with Apple's names and signatures (issue
    /// 31), for code that registers presenters with
    /// `NSFileCoordinator.addFilePresenter(_:)`. Linux Foundation has none:
    /// on Apple's systems Foundation's own is used and this one does not
    /// exist. Swift on Linux has no optional protocol requirements: every
    /// callback has an empty default, so a method whose signature differs
    /// from these is never called (docs/CLIENTS.md lists them).
    ///
    /// Callbacks run on `presentedItemOperationQueue`. ScopeFS tells after
    /// the fact: an item is already deleted or moved when its callback
    /// runs, and completion handlers' errors are not used.
    public protocol NSFilePresenter: NSObjectProtocol {
        var presentedItemURL: URL? { get }
        var presentedItemOperationQueue: OperationQueue { get }

        func presentedItemDidChange()
        func presentedItemDidMove(to newURL: URL)
        func accommodatePresentedItemDeletion(completionHandler: @escaping ((any Error)?) -> Void)
        /// Another app's writer waits for this app's claim: save now.
        func savePresentedItemChanges(completionHandler: @escaping ((any Error)?) -> Void)
        /// Another app's writer waits: end the claim (leave the
        /// `coordinate` block), then call `writer` (its reacquirer is not used).
        func relinquishPresentedItem(toWriter writer: @escaping ((() -> Void)?) -> Void)
        func presentedSubitemDidAppear(at url: URL)
        func presentedSubitem(at oldURL: URL, didMoveTo newURL: URL)
        func accommodatePresentedSubitemDeletion(at url: URL, completionHandler: @escaping ((any Error)?) -> Void)
        func presentedSubitemDidChange(at url: URL)
        /// An extension's item was downloaded, evicted, uploaded or met a
        /// conflict (`user.scopefs.state`).
        func presentedItemDidChangeUbiquityAttributes(_ attributes: Set<URLResourceKey>)
    }

    extension NSFilePresenter {
        public func presentedItemDidChange() {}
        public func presentedItemDidMove(to newURL: URL) {}
        public func accommodatePresentedItemDeletion(completionHandler: @escaping ((any Error)?) -> Void) {
            completionHandler(nil)
        }
        public func savePresentedItemChanges(completionHandler: @escaping ((any Error)?) -> Void) {
            completionHandler(nil)
        }
        public func relinquishPresentedItem(toWriter writer: @escaping ((() -> Void)?) -> Void) { writer(nil) }
        public func presentedSubitemDidAppear(at url: URL) {}
        public func presentedSubitem(at oldURL: URL, didMoveTo newURL: URL) {}
        public func accommodatePresentedSubitemDeletion(
            at url: URL, completionHandler: @escaping ((any Error)?) -> Void
        ) {
            completionHandler(nil)
        }
        public func presentedSubitemDidChange(at url: URL) {}
        public func presentedItemDidChangeUbiquityAttributes(_ attributes: Set<URLResourceKey>) {}
    }

    /// Calls an `NSFilePresenter`'s callbacks for notices, on its queue.
    enum NSFilePresenterDelivery {
        static func deliver(_ notice: DocumentNotice, to presenter: any NSFilePresenter) {
            let audience = FilePresenterDelivery.Audience.of(notice, presenting: presenter.presentedItemURL)
            let call: (() -> Void)?
            switch (audience, notice.kind) {
            case (.item, .changed): call = { presenter.presentedItemDidChange() }
            case (.item, .moved): call = { presenter.presentedItemDidMove(to: notice.url) }
            case (.item, .deleted): call = { presenter.accommodatePresentedItemDeletion { _ in } }
            case (.item, .save): call = { presenter.savePresentedItemChanges { _ in } }
            case (.item, .relinquish): call = { presenter.relinquishPresentedItem(toWriter: { _ in }) }
            case (.item, .state):
                call = { presenter.presentedItemDidChangeUbiquityAttributes(FilePresenterDelivery.stateKeys) }
            case (.subitem, .changed): call = { presenter.presentedSubitemDidChange(at: notice.url) }
            case (.subitem, .appeared): call = { presenter.presentedSubitemDidAppear(at: notice.url) }
            case (.subitem, .moved):
                call = { presenter.presentedSubitem(at: notice.oldURL ?? notice.url, didMoveTo: notice.url) }
            case (.subitem, .deleted):
                call = { presenter.accommodatePresentedSubitemDeletion(at: notice.url) { _ in } }
            default: call = nil
            }
            guard let call else { return }
            // The presenter is the app's own object, called on the queue it
            // chose, as Apple calls it.
            let unchecked = UncheckedCall(run: call)
            presenter.presentedItemOperationQueue.addOperation { unchecked.run() }
        }

        private struct UncheckedCall: @unchecked Sendable {
            let run: () -> Void
        }
    }

    /// The presenters `NSFileCoordinator.addFilePresenter` registered, and
    /// the one thread that hears the app's notices for them while any is.
    final class FilePresenterRegistry: @unchecked Sendable {
        static let shared = FilePresenterRegistry()

        private let lock = NSLock()
        private var presenters: [any NSFilePresenter] = []
        private var subscription: DocumentPresenter?
        private var generation = 0

        var registered: [any NSFilePresenter] {
            lock.lock()
            defer { lock.unlock() }
            return presenters
        }

        /// Registers `presenter`; the first one subscribes (from now on)
        /// and starts the listening thread. Without a daemon or outside an
        /// app process nothing is heard (as a presenter of an item no
        /// coordinator touches).
        func add(_ presenter: any NSFilePresenter) {
            lock.lock()
            defer { lock.unlock() }
            guard !presenters.contains(where: { $0 === presenter }) else { return }
            presenters.append(presenter)
            guard subscription == nil, let subscription = try? DocumentPresenter() else { return }
            self.subscription = subscription
            generation += 1
            let mine = generation
            Thread.detachNewThread { [self] in listen(subscription, generation: mine) }
        }

        func remove(_ presenter: any NSFilePresenter) {
            lock.lock()
            defer { lock.unlock() }
            presenters.removeAll { $0 === presenter }
            if presenters.isEmpty { subscription = nil }
        }

        private func listen(_ subscription: DocumentPresenter, generation mine: Int) {
            while true {
                var notice: DocumentNotice? = nil
                do { notice = try subscription.next(timeout: 1) } catch { Thread.sleep(forTimeInterval: 1) }
                lock.lock()
                let current = self.subscription === subscription && generation == mine
                let audience = presenters
                lock.unlock()
                guard current else { return }
                guard let notice else { continue }
                for presenter in audience { NSFilePresenterDelivery.deliver(notice, to: presenter) }
            }
        }
    }
#endif
