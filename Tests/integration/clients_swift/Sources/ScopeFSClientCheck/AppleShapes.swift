// Apple-shaped code (issue 31): written as it is on Apple's systems, with
// Apple's names — NSFilePresenter, NSFileCoordinator, NSMetadataQuery and
// its notifications, UIDocumentPickerViewController and its delegate — and
// compiled against ScopeFSClient on Linux. test_apple_shapes.py drives it:
//
//   scopefs-client-check apple-presenter FOLDER   (subitem callbacks; stdin: "write", then "end")
//   scopefs-client-check subitem-presenter FOLDER (ScopeFS's FilePresenter, the same callbacks)
//   scopefs-client-check apple-query              (NSMetadataQuery notifications; stdin: "end")
//   scopefs-client-check apple-picker             (UIDocumentPickerDelegate)
import Foundation
import ScopeFSClient

/// One JSON line per event, for the test to read as it comes.
func sayLine(_ object: [String: Any]) {
    var object = object
    object["at"] = Date().timeIntervalSince1970
    let data = try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
    // Straight to the descriptor, not print and fflush(nil): that locks
    // stdin too, which the main thread holds while it waits in readLine.
    FileHandle.standardOutput.write(data + Data("\n".utf8))
}

/// A folder's presenter, as an iOS app writes one.
final class FolderPresenter: NSObject, NSFilePresenter {
    var presentedItemURL: URL?
    let presentedItemOperationQueue: OperationQueue = {
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        return queue
    }()

    init(folder: URL) {
        presentedItemURL = folder
    }

    func presentedSubitemDidAppear(at url: URL) {
        sayLine(["call": "presentedSubitemDidAppear", "url": url.path])
    }

    func presentedSubitem(at oldURL: URL, didMoveTo newURL: URL) {
        sayLine(["call": "presentedSubitem(at:didMoveTo:)", "old": oldURL.path, "url": newURL.path])
    }

    func accommodatePresentedSubitemDeletion(at url: URL, completionHandler: @escaping (Error?) -> Void) {
        sayLine(["call": "accommodatePresentedSubitemDeletion", "url": url.path])
        completionHandler(nil)
    }

    func presentedSubitemDidChange(at url: URL) {
        sayLine(["call": "presentedSubitemDidChange", "url": url.path])
    }

    func presentedItemDidMove(to newURL: URL) {
        sayLine(["call": "presentedItemDidMove", "url": newURL.path])
        presentedItemURL = newURL
    }
}

/// The same with ScopeFS's own `FilePresenter`, run by `DocumentPresenter`.
final class SubitemRecorder: FilePresenter {
    let presentedItemURL: URL?
    init(_ url: URL) { presentedItemURL = url }
    func presentedSubitemDidAppear(at url: URL) { sayLine(["call": "presentedSubitemDidAppear", "url": url.path]) }
    func presentedSubitem(at oldURL: URL, didMoveTo newURL: URL) {
        sayLine(["call": "presentedSubitem(at:didMoveTo:)", "old": oldURL.path, "url": newURL.path])
    }
    func accommodatePresentedSubitemDeletion(at url: URL, completionHandler: @escaping ((any Error)?) -> Void) {
        sayLine(["call": "accommodatePresentedSubitemDeletion", "url": url.path])
        completionHandler(nil)
    }
    func presentedSubitemDidChange(at url: URL) { sayLine(["call": "presentedSubitemDidChange", "url": url.path]) }
}

/// The paths of a query's items, read by attribute.
func urls(_ items: Any?) -> [String] {
    ((items as? [NSMetadataItem]) ?? []).compactMap { ($0.value(forAttribute: NSMetadataItemURLKey) as? URL)?.path }
}

final class PickerDelegate: NSObject, UIDocumentPickerDelegate {
    func documentPicker(_ controller: UIDocumentPickerViewController, didPickDocumentsAt urls: [URL]) {
        sayLine(["call": "documentPicker(_:didPickDocumentsAt:)", "urls": urls.map(\.path)])
    }

    func documentPickerWasCancelled(_ controller: UIDocumentPickerViewController) {
        sayLine(["call": "documentPickerWasCancelled"])
    }
}

/// Runs an Apple-shaped mode; false when `args[1]` is none of them.
func runAppleShape(_ args: [String]) throws -> Bool {
    switch args[1] {
    case "apple-presenter" where args.count == 3:
        let folder = URL(fileURLWithPath: args[2])
        let started = folder.startAccessingSecurityScopedResource()
        _ = try? FileManager.default.contentsOfDirectory(atPath: folder.path)  // what a folder's presenter shows
        let presenter = FolderPresenter(folder: folder)
        NSFileCoordinator.addFilePresenter(presenter)
        sayLine(["call": "ready", "presenters": NSFileCoordinator.filePresenters.count])
        while let line = readLine(), line != "end" {
            guard line == "write" else { continue }
            // This app's own coordinated changes: its presenters hear none.
            let coordinator = NSFileCoordinator(filePresenter: presenter)
            var error: NSError?
            let own = folder.appendingPathComponent("own.txt")
            coordinator.coordinate(writingItemAt: own, options: .forReplacing, error: &error) { url in
                try? "written under a claim\n".write(to: url, atomically: false, encoding: .utf8)
            }
            let copy = folder.appendingPathComponent("copy.txt")
            coordinator.coordinate(
                readingItemAt: own, options: [], writingItemAt: copy, options: .forReplacing,
                error: &error
            ) { reading, writing in
                try? FileManager.default.copyItem(at: reading, to: writing)
            }
            sayLine(["call": "wrote", "error": error.map { "\($0.code)" } ?? "none"])
        }
        NSFileCoordinator.removeFilePresenter(presenter)
        if started { folder.stopAccessingSecurityScopedResource() }
        sayLine(["call": "ended", "presenters": NSFileCoordinator.filePresenters.count])
        exit(0)

    case "subitem-presenter" where args.count == 3:
        let folder = URL(fileURLWithPath: args[2])
        let started = folder.startAccessingSecurityScopedResource()
        _ = try? FileManager.default.contentsOfDirectory(atPath: folder.path)
        let notices = try DocumentPresenter()
        sayLine(["call": "ready"])
        try notices.present(SubitemRecorder(folder), timeout: 3)
        if started { folder.stopAccessingSecurityScopedResource() }
        sayLine(["call": "ended"])
        exit(0)

    case "apple-query":
        let query = NSMetadataQuery()
        query.searchScopes = [NSMetadataQueryAccessibleUbiquitousExternalDocumentsScope]
        query.operationQueue = OperationQueue()
        let center = NotificationCenter.default
        let gathered = center.addObserver(forName: .NSMetadataQueryDidFinishGathering, object: query, queue: nil) {
            _ in
            sayLine(["call": "NSMetadataQueryDidFinishGathering", "urls": urls(query.results)])
        }
        let updated = center.addObserver(forName: .NSMetadataQueryDidUpdate, object: query, queue: nil) {
            notification in
            sayLine([
                "call": "NSMetadataQueryDidUpdate",
                "added": urls(notification.userInfo?[NSMetadataQueryUpdateAddedItemsKey]),
                "removed": urls(notification.userInfo?[NSMetadataQueryUpdateRemovedItemsKey]),
                "count": query.resultCount,
            ])
        }
        query.start()
        while let line = readLine(), line != "end" {}
        query.stop()
        center.removeObserver(gathered)
        center.removeObserver(updated)
        exit(0)

    case "apple-picker":
        let picker = UIDocumentPickerViewController(forOpeningContentTypes: [.plainText])
        let delegate = PickerDelegate()
        picker.delegate = delegate
        picker.allowsMultipleSelection = false
        picker.delegateQueue = OperationQueue()
        picker.present()
        withExtendedLifetime(delegate) { _ = picker.waitUntilDismissed(timeout: 60) }  // a weak delegate, as Apple's
        exit(0)

    default:
        return false
    }
}
