import Foundation
import Testing

@testable import ScopeFSClient

/// How notices reach presenters' callbacks (issue 31, SPEC S27c): a folder's
/// presenter gets Apple's subitem callbacks for items inside it, at any
/// depth; nothing for items beside it.
@Suite struct PresenterDeliveryTests {
    static func notice(_ kind: String, _ path: String, old: String? = nil, subitem: Bool = true) throws
        -> DocumentNotice
    {
        var object: [String: Any] = ["kind": kind, "grant": 1, "provider": "local", "path": path]
        if let old { object["oldPath"] = old }
        if subitem { object["subitem"] = true }
        return try JSONDecoder().decode(DocumentNotice.self, from: JSONSerialization.data(withJSONObject: object))
    }

    static func url(_ path: String) -> URL { DocumentPresenter.url(inApp: path) }

    final class Recorder: FilePresenter {
        let presentedItemURL: URL?
        var calls: [String] = []
        init(_ path: String?) { presentedItemURL = path.map(PresenterDeliveryTests.url) }
        func presentedSubitemDidAppear(at url: URL) { calls.append("appear \(url.lastPathComponent)") }
        func presentedSubitem(at oldURL: URL, didMoveTo newURL: URL) {
            calls.append("move \(oldURL.lastPathComponent) \(newURL.lastPathComponent)")
        }
        func accommodatePresentedSubitemDeletion(at url: URL, completionHandler: @escaping ((any Error)?) -> Void) {
            calls.append("delete \(url.lastPathComponent)")
            completionHandler(nil)
        }
        func presentedSubitemDidChange(at url: URL) { calls.append("change \(url.lastPathComponent)") }
        func presentedItemDidMove(to newURL: URL) { calls.append("itemMove \(newURL.lastPathComponent)") }
        func accommodatePresentedItemDeletion() { calls.append("itemDelete") }
    }

    @Test func aFoldersPresenterHearsItsSubitemsAtAnyDepth() throws {
        let folder = Recorder("Providers/local/docs")
        for notice in [
            try Self.notice("appeared", "Providers/local/docs/a.txt"),
            try Self.notice("moved", "Providers/local/docs/inner/b.txt", old: "Providers/local/docs/a.txt"),
            try Self.notice("changed", "Providers/local/docs/inner/b.txt"),
            try Self.notice("deleted", "Providers/local/docs/inner/b.txt"),
            try Self.notice("appeared", "Providers/local/docs-sibling/c.txt"),
            try Self.notice("deleted", "Providers/local/other/d.txt"),
        ] {
            FilePresenterDelivery.deliver(notice, to: folder)
        }
        #expect(folder.calls == ["appear a.txt", "move a.txt b.txt", "change b.txt", "delete b.txt"])
    }

    @Test func thePresentedItemItselfGetsItsOwnCallbacks() throws {
        let inner = Recorder("Providers/local/docs/inner")
        FilePresenterDelivery.deliver(
            try Self.notice("moved", "Providers/local/docs/inner2", old: "Providers/local/docs/inner"), to: inner)
        FilePresenterDelivery.deliver(
            try Self.notice("deleted", "Providers/local/docs/inner", subitem: false), to: inner)
        #expect(inner.calls == ["itemMove inner2", "itemDelete"])
    }

    @Test func aPresenterOfEveryDocumentHearsSubitemsAsSubitems() throws {
        let all = Recorder(nil)
        FilePresenterDelivery.deliver(try Self.notice("appeared", "Providers/local/docs/a.txt"), to: all)
        FilePresenterDelivery.deliver(try Self.notice("deleted", "Providers/local/report.txt", subitem: false), to: all)
        #expect(all.calls == ["appear a.txt", "itemDelete"])
    }

    #if !canImport(Darwin)
        final class ApplePresenter: NSObject, NSFilePresenter {
            var presentedItemURL: URL? = PresenterDeliveryTests.url("Providers/local/docs")
            let presentedItemOperationQueue = OperationQueue()
            let lock = NSLock()
            var calls: [String] = []
            func record(_ call: String) {
                lock.lock()
                calls.append(call)
                lock.unlock()
            }
            func presentedSubitemDidAppear(at url: URL) { record("appear \(url.lastPathComponent)") }
            func presentedSubitem(at oldURL: URL, didMoveTo newURL: URL) { record("move \(newURL.lastPathComponent)") }
            func accommodatePresentedSubitemDeletion(at url: URL, completionHandler: @escaping (Error?) -> Void) {
                record("delete \(url.lastPathComponent)")
                completionHandler(nil)
            }
        }

        @Test func anNSFilePresenterGetsApplesCallbacksOnItsQueue() throws {
            let presenter = ApplePresenter()
            presenter.presentedItemOperationQueue.maxConcurrentOperationCount = 1
            NSFilePresenterDelivery.deliver(try Self.notice("appeared", "Providers/local/docs/a.txt"), to: presenter)
            NSFilePresenterDelivery.deliver(
                try Self.notice("moved", "Providers/local/docs/b.txt", old: "Providers/local/docs/a.txt"), to: presenter
            )
            NSFilePresenterDelivery.deliver(try Self.notice("deleted", "Providers/local/docs/b.txt"), to: presenter)
            NSFilePresenterDelivery.deliver(try Self.notice("appeared", "Providers/local/elsewhere.txt"), to: presenter)
            presenter.presentedItemOperationQueue.waitUntilAllOperationsAreFinished()
            #expect(presenter.calls == ["appear a.txt", "move b.txt", "delete b.txt"])
        }

        @Test func applesCoordinatorNamesCompileAndFailWithoutADaemon() {
            let coordinator = NSFileCoordinator(filePresenter: nil)
            coordinator.timeout = 0.1
            coordinator.stateDirectory = "/nonexistent-scopefs-state"
            var error: NSError?
            var ran = false
            coordinator.coordinate(
                readingItemAt: URL(fileURLWithPath: "/tmp/a"), options: [.withoutChanges],
                writingItemAt: URL(fileURLWithPath: "/tmp/b"), options: [.forReplacing], error: &error
            ) { _, _ in ran = true }
            #expect(!ran)
            #expect(error?.domain == NSPOSIXErrorDomain)
        }

        @Test func applesQueryAndPickerNamesCompile() {
            let query = NSMetadataQuery()
            query.searchScopes = [NSMetadataQueryUbiquitousDocumentsScope]
            query.predicate = NSPredicate { _, _ in true }
            #expect(query.resultCount == 0 && !query.isStarted)
            let names: [Notification.Name] = [.NSMetadataQueryDidFinishGathering, .NSMetadataQueryDidUpdate]
            #expect(names.count == 2)
            let picker = UIDocumentPickerViewController(forOpeningContentTypes: [.plainText, .pdf], asCopy: true)
            picker.allowsMultipleSelection = true
            #expect(picker.delegate == nil)
        }
    #endif
}
