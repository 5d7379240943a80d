#if !canImport(Darwin)
    import Foundation

    #if canImport(Glibc)
        import Glibc
    #elseif canImport(Musl)
        import Musl
    #endif

    /// Apple's `UTType` (UniformTypeIdentifiers, which Linux lacks), as far as
    /// the picker needs it: an identifier the owner's agent filters by.
    public struct UTType: Hashable, Sendable, CustomStringConvertible {
        public let identifier: String

        public init(_ identifier: String) {
            self.identifier = identifier
        }

        /// A MIME type, as the picker request takes it (`text/plain`).
        public init?(mimeType: String) {
            guard mimeType.contains("/") else { return nil }
            self.identifier = mimeType
        }

        public var description: String { identifier }

        public static let item = UTType("public.item")
        public static let content = UTType("public.content")
        public static let data = UTType("public.data")
        public static let folder = UTType("public.folder")
        public static let text = UTType("public.text")
        public static let plainText = UTType("public.plain-text")
        public static let json = UTType("public.json")
        public static let pdf = UTType("com.adobe.pdf")
        public static let image = UTType("public.image")
        public static let jpeg = UTType("public.jpeg")
        public static let png = UTType("public.png")
    }

    /// Apple's `UIDocumentPickerDelegate` (issue 31). Both methods have
    /// empty defaults; they run on the picker's `delegateQueue`.
    public protocol UIDocumentPickerDelegate: AnyObject {
        func documentPicker(_ controller: UIDocumentPickerViewController, didPickDocumentsAt urls: [URL])
        func documentPickerWasCancelled(_ controller: UIDocumentPickerViewController)
    }

    extension UIDocumentPickerDelegate {
        public func documentPicker(_ controller: UIDocumentPickerViewController, didPickDocumentsAt urls: [URL]) {}
        public func documentPickerWasCancelled(_ controller: UIDocumentPickerViewController) {}
    }

    /// Apple's `UIDocumentPickerViewController`, over `DocumentPicker` (the
    /// owner's picker agent answers, SPEC S21a). There is no view
    /// controller to present it from: `present()` (not Apple's) asks, and the
    /// delegate hears the URLs or the cancel. A failure (no agent, a
    /// timeout) is a cancel too, with `error` telling why.
    open class UIDocumentPickerViewController: @unchecked Sendable {
        public weak var delegate: (any UIDocumentPickerDelegate)?
        open var allowsMultipleSelection = false
        /// Where the picker starts: a folder of a provider, in this app's
        /// view (`$SCOPEFS_MOUNT/Providers/PROVIDER/DIR`).
        open var directoryURL: URL?
        /// Accepted for Apple's code; the agent decides what it shows.
        open var shouldShowFileExtensions = true
        /// Where the delegate is called (not Apple's; Apple: the main
        /// thread). Nil: the main queue, which the app's run loop serves.
        open var delegateQueue: OperationQueue?
        /// Not Apple's: why the last pick ended in a cancel, if it failed.
        public private(set) var error: ScopeFSError?
        /// Not Apple's: the state directory (nil: `$SCOPEFS_STATE`).
        open var stateDirectory: String?
        open var timeout: Double = 300

        private let mode: DocumentPicker.Mode
        private let contentTypes: [UTType]
        private let exporting: [URL]
        private let done = DispatchSemaphore(value: 0)

        /// Open (security-scoped originals), or import (copies in the
        /// inbox) with `asCopy`.
        public init(forOpeningContentTypes contentTypes: [UTType], asCopy: Bool = false) {
            self.mode = asCopy ? .import : .open
            self.contentTypes = contentTypes
            self.exporting = []
        }

        /// Export (copies) or, without `asCopy`, move container items to a
        /// folder the user picks.
        public init(forExporting urls: [URL], asCopy: Bool = false) {
            self.mode = asCopy ? .export : .move
            self.contentTypes = []
            self.exporting = urls
        }

        /// Asks the user (not Apple's: Apple presents the controller from a
        /// view controller). Returns at once; `completion` runs once the
        /// request is made, the delegate when the user answered.
        open func present(completion: (() -> Void)? = nil) {
            Thread.detachNewThread { [self] in
                let result: Result<[URL], ScopeFSError>
                do throws(ScopeFSError) {
                    result = .success(try pick())
                } catch {
                    result = .failure(error)
                }
                let call = UncheckedCall { [self] in
                    switch result {
                    case .success(let urls): delegate?.documentPicker(self, didPickDocumentsAt: urls)
                    case .failure(let failure):
                        if failure.errno != ECANCELED { error = failure }
                        delegate?.documentPickerWasCancelled(self)
                    }
                    done.signal()
                }
                (delegateQueue ?? .main).addOperation { call.run() }
            }
            completion?()
        }

        /// Not Apple's: waits until the delegate was called (a program
        /// without a run loop; the delegate must not run on this thread).
        @discardableResult
        open func waitUntilDismissed(timeout: Double = 300) -> Bool {
            done.wait(timeout: .now() + timeout) == .success
        }

        private func pick() throws(ScopeFSError) -> [URL] {
            let items = try exporting.map { url throws(ScopeFSError) in try DocumentPicker.containerPath(of: url) }
            return try DocumentPicker.pick(
                mode, contentTypes.map(\.identifier), allowsMultipleSelection, providerFolder(directoryURL), items,
                timeout, stateDirectory)
        }

        /// `PROVIDER:DIR` for a URL under `$SCOPEFS_MOUNT/Providers/`.
        private func providerFolder(_ url: URL?) -> String? {
            guard let url else { return nil }
            let root = (ProcessInfo.processInfo.environment["SCOPEFS_MOUNT"] ?? "") + "/Providers/"
            let path = url.standardizedFileURL.path
            guard path.hasPrefix(root) else { return nil }
            let parts = path.dropFirst(root.count).split(separator: "/", maxSplits: 1)
            guard let provider = parts.first else { return nil }
            return String(provider) + ":" + (parts.count > 1 ? String(parts[1]) : "")
        }

        private struct UncheckedCall: @unchecked Sendable {
            let run: () -> Void
        }
    }
#endif
