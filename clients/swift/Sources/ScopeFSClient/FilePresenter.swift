import Foundation

/// Apple's `NSFilePresenter` callbacks, driven by the app's document notices
/// (issue 17). Every method has an empty default. `presentedItemURL` names
/// the item presented (a file, or a folder whose items are "subitems"); nil
/// presents every document of the app. Run it with
/// `DocumentPresenter.present(_:timeout:until:)`, or hand it notices with
/// `FilePresenterDelivery.deliver(_:to:)`.
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
    /// It was renamed or moved (on the host or through the mount).
    func presentedItemDidMove(to newURL: URL)
    /// It was deleted.
    func accommodatePresentedItemDeletion()
    /// Another app waits for it: save your changes now.
    func savePresentedItemChanges()
    /// Apple's `relinquishPresentedItem(toWriter:)`: end your claim.
    func relinquishPresentedItem()
    /// Every notice about the item, before its callback (also the ones
    /// Apple's presenters have no callback for: arrived, revoked...).
    func presentedItemNotice(_ notice: DocumentNotice)
}

extension FilePresenter {
    public func presentedItemDidChange() {}
    public func presentedSubitemDidChange(at url: URL) {}
    public func presentedItemDidMove(to newURL: URL) {}
    public func accommodatePresentedItemDeletion() {}
    public func savePresentedItemChanges() {}
    public func relinquishPresentedItem() {}
    public func presentedItemNotice(_ notice: DocumentNotice) {}
}

public enum FilePresenterDelivery {
    /// Calls the presenter's callback for `notice`, if it concerns the
    /// presented item (or, for `changed`, an item inside it).
    public static func deliver(_ notice: DocumentNotice, to presenter: any FilePresenter) {
        let path = notice.url.standardizedFileURL.path
        let presented = presenter.presentedItemURL?.standardizedFileURL.path
        let isItem = presented == nil || presented == path || presented == notice.oldURL?.standardizedFileURL.path
        if isItem {
            presenter.presentedItemNotice(notice)
            switch notice.kind {
            case .changed: presenter.presentedItemDidChange()
            case .moved: presenter.presentedItemDidMove(to: notice.url)
            case .deleted: presenter.accommodatePresentedItemDeletion()
            case .save: presenter.savePresentedItemChanges()
            case .relinquish: presenter.relinquishPresentedItem()
            case .arrived, .revoked, .restored, .forgotten: break
            }
        } else if let presented, notice.kind == .changed, path.hasPrefix(presented + "/") {
            presenter.presentedSubitemDidChange(at: notice.url)
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
