import Foundation

/// Apple's `NSFilePresenter` callbacks, driven by the app's document notices
/// (issue 17, issue 31). Every method has an empty default. `presentedItemURL`
/// names the item presented (a file, or a folder whose items are
/// "subitems", at any depth); nil presents every document of the app. Run
/// it with `DocumentPresenter.present(_:timeout:until:)`, or hand it
/// notices with `FilePresenterDelivery.deliver(_:to:)`. For Apple's own
/// protocol and `NSFileCoordinator.addFilePresenter`, see `NSFilePresenter`.
///
/// When another app's coordinated claim waits for one this app holds,
/// `savePresentedItemChanges()` runs first, then
/// `relinquishPresentedItem()`: save, then end the claim (leave the
/// `FileCoordinator.coordinate` body) so the other app can go on.
public protocol FilePresenter: AnyObject {
    var presentedItemURL: URL? { get }
    /// Its content changed, on the host or through another app's write.
    func presentedItemDidChange()
    /// A file inside the presented folder changed.
    func presentedSubitemDidChange(at url: URL)
    /// An item appeared inside the presented folder: made on the host or
    /// by another app, or moved in from where this app cannot see.
    func presentedSubitemDidAppear(at url: URL)
    /// An item inside the presented folder was renamed or moved (both
    /// places inside what this app was given).
    func presentedSubitem(at oldURL: URL, didMoveTo newURL: URL)
    /// An item inside the presented folder was deleted, or moved out of
    /// this app's sight. It is already gone (ScopeFS tells after the
    /// fact): `completionHandler`'s error is not used.
    func accommodatePresentedSubitemDeletion(at url: URL, completionHandler: @escaping ((any Error)?) -> Void)
    /// It was renamed or moved (on the host or through the mount).
    func presentedItemDidMove(to newURL: URL)
    /// It was deleted.
    func accommodatePresentedItemDeletion()
    /// Another app waits for it: save your changes now.
    func savePresentedItemChanges()
    /// Apple's `relinquishPresentedItem(toWriter:)`: end your claim.
    func relinquishPresentedItem()
    /// An extension's item was downloaded, evicted, uploaded, or met a
    /// conflict: read `user.scopefs.state` (`attributes` names what
    /// Apple's keys would).
    func presentedItemDidChangeUbiquityAttributes(_ attributes: Set<URLResourceKey>)
    /// Every notice about the item or its subitems, before its callback
    /// (also the ones Apple's presenters have no callback for: arrived,
    /// revoked...).
    func presentedItemNotice(_ notice: DocumentNotice)
}

extension FilePresenter {
    public func presentedItemDidChange() {}
    public func presentedSubitemDidChange(at url: URL) {}
    public func presentedSubitemDidAppear(at url: URL) {}
    public func presentedSubitem(at oldURL: URL, didMoveTo newURL: URL) {}
    public func accommodatePresentedSubitemDeletion(at url: URL, completionHandler: @escaping ((any Error)?) -> Void) {
        completionHandler(nil)
    }
    public func presentedItemDidMove(to newURL: URL) {}
    public func accommodatePresentedItemDeletion() {}
    public func savePresentedItemChanges() {}
    public func relinquishPresentedItem() {}
    public func presentedItemDidChangeUbiquityAttributes(_ attributes: Set<URLResourceKey>) {}
    public func presentedItemNotice(_ notice: DocumentNotice) {}
}

public enum FilePresenterDelivery {
    /// What a `state` notice says changed, in Apple's keys.
    static let stateKeys: Set<URLResourceKey> = [
        .ubiquitousItemDownloadingStatusKey, .ubiquitousItemIsUploadingKey, .ubiquitousItemHasUnresolvedConflictsKey,
    ]

    /// Calls the presenter's callback for `notice`, if it concerns the
    /// presented item or an item inside it.
    public static func deliver(_ notice: DocumentNotice, to presenter: any FilePresenter) {
        switch Audience.of(notice, presenting: presenter.presentedItemURL) {
        case .none:
            return
        case .item:
            presenter.presentedItemNotice(notice)
            switch notice.kind {
            case .changed: presenter.presentedItemDidChange()
            case .moved: presenter.presentedItemDidMove(to: notice.url)
            case .deleted: presenter.accommodatePresentedItemDeletion()
            case .save: presenter.savePresentedItemChanges()
            case .relinquish: presenter.relinquishPresentedItem()
            case .state: presenter.presentedItemDidChangeUbiquityAttributes(FilePresenterDelivery.stateKeys)
            case .arrived, .revoked, .restored, .forgotten, .appeared: break
            }
        case .subitem:
            presenter.presentedItemNotice(notice)
            switch notice.kind {
            case .changed: presenter.presentedSubitemDidChange(at: notice.url)
            case .appeared: presenter.presentedSubitemDidAppear(at: notice.url)
            case .moved: presenter.presentedSubitem(at: notice.oldURL ?? notice.url, didMoveTo: notice.url)
            case .deleted: presenter.accommodatePresentedSubitemDeletion(at: notice.url) { _ in }
            case .arrived, .revoked, .restored, .forgotten, .save, .relinquish, .state: break
            }
        }
    }

    /// Whom of a presenter a notice is for: its item, an item inside it
    /// (at any depth), or neither.
    enum Audience {
        case item, subitem, none

        static func of(_ notice: DocumentNotice, presenting presented: URL?) -> Audience {
            guard let presented = presented?.standardizedFileURL.path else {
                // Every document of the app: a subitem is its folder's.
                return notice.isSubitem || notice.kind == .appeared ? .subitem : .item
            }
            let paths = [notice.url, notice.oldURL].compactMap { $0?.standardizedFileURL.path }
            if paths.contains(presented) { return .item }
            if paths.contains(where: { $0.hasPrefix(presented + "/") }) { return .subitem }
            return .none
        }
    }
}

extension DocumentPresenter {
    /// Delivers notices to `presenter` as they come, until `timeout`
    /// seconds pass without one or `done` (asked after each) says so.
    public func present(
        _ presenter: any FilePresenter, timeout: Double = 10, until done: () -> Bool = { false }
    ) throws(ScopeFSError) {
        while let notice = try next(timeout: timeout) {
            FilePresenterDelivery.deliver(notice, to: presenter)
            if done() { return }
        }
    }
}
