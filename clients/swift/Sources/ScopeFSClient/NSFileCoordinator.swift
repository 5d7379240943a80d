#if !canImport(Darwin)
    import Foundation

    #if canImport(Glibc)
        import Glibc
    #elseif canImport(Musl)
        import Musl
    #endif

    /// Apple's `NSErrorPointer`, which Linux Foundation lacks: `&error` of
    /// an `NSError?` passes as on Apple's systems.
    public typealias NSErrorPointer = UnsafeMutablePointer<NSError?>?

    /// Apple's `NSFileCoordinator`, with Apple's names (issue 31), over
    /// ScopeFS's claims (`FileCoordinator`, SPEC S27b): writers exclude
    /// readers and other writers of other processes of any app; a writer
    /// kept waiting asks the holders' presenters to save, then to
    /// relinquish. Linux Foundation has none; on Apple's systems
    /// Foundation's own is used and this one does not exist.
    ///
    /// The options are accepted and do not change the claim (a reading
    /// claim is a reading claim), but for `immediatelyAvailableMetadataOnly`:
    /// a metadata-only read (Apple's promised items, SPEC S50) takes no
    /// claim, so it never waits for a writer nor asks presenters to save,
    /// and whatever the accessor reads through `promisedItemResourceValues`
    /// never downloads. A claim that cannot be had within
    /// `timeout` seconds (10, Apple waits without end) fills `error` and
    /// does not run the accessor. Two items are claimed in path order, so
    /// two coordinators cannot wait for each other.
    open class NSFileCoordinator: @unchecked Sendable {
        public struct ReadingOptions: OptionSet, Sendable {
            public let rawValue: UInt
            public init(rawValue: UInt) { self.rawValue = rawValue }
            public static let withoutChanges = ReadingOptions(rawValue: 1 << 0)
            public static let resolvesSymbolicLink = ReadingOptions(rawValue: 1 << 1)
            public static let immediatelyAvailableMetadataOnly = ReadingOptions(rawValue: 1 << 2)
            public static let forUploading = ReadingOptions(rawValue: 1 << 3)
        }

        public struct WritingOptions: OptionSet, Sendable {
            public let rawValue: UInt
            public init(rawValue: UInt) { self.rawValue = rawValue }
            public static let forDeleting = WritingOptions(rawValue: 1 << 0)
            public static let forMoving = WritingOptions(rawValue: 1 << 1)
            public static let forMerging = WritingOptions(rawValue: 1 << 2)
            public static let forReplacing = WritingOptions(rawValue: 1 << 3)
            public static let contentIndependentMetadataOnly = WritingOptions(rawValue: 1 << 4)
        }

        /// The presenter this coordinator acts for. ScopeFS tells changes
        /// per app: no presenter of the app hears the app's own changes.
        public let filePresenter: (any NSFilePresenter)?
        /// How long a claim may wait (not Apple's: it waits without end).
        public var timeout: Double = 10
        /// The state directory (nil: `$SCOPEFS_STATE`, the app's).
        public var stateDirectory: String?

        public init(filePresenter: (any NSFilePresenter)? = nil) {
            self.filePresenter = filePresenter
        }

        // MARK: Presenters

        public class func addFilePresenter(_ filePresenter: any NSFilePresenter) {
            FilePresenterRegistry.shared.add(filePresenter)
        }

        public class func removeFilePresenter(_ filePresenter: any NSFilePresenter) {
            FilePresenterRegistry.shared.remove(filePresenter)
        }

        public class var filePresenters: [any NSFilePresenter] { FilePresenterRegistry.shared.registered }

        // MARK: Coordination

        public func coordinate(
            readingItemAt url: URL, options: ReadingOptions = [], error outError: NSErrorPointer,
            byAccessor reader: (URL) -> Void
        ) {
            if options.contains(.immediatelyAvailableMetadataOnly) { return reader(url) }
            claimed([(url, .reading)], outError) { reader(url) }
        }

        public func coordinate(
            writingItemAt url: URL, options: WritingOptions = [], error outError: NSErrorPointer,
            byAccessor writer: (URL) -> Void
        ) {
            claimed([(url, .writing)], outError) { writer(url) }
        }

        public func coordinate(
            readingItemAt readingURL: URL, options readingOptions: ReadingOptions = [], writingItemAt writingURL: URL,
            options writingOptions: WritingOptions = [], error outError: NSErrorPointer,
            byAccessor readerWriter: (URL, URL) -> Void
        ) {
            if readingOptions.contains(.immediatelyAvailableMetadataOnly) {
                claimed([(writingURL, .writing)], outError) { readerWriter(readingURL, writingURL) }
                return
            }
            claimed([(readingURL, .reading), (writingURL, .writing)], outError) { readerWriter(readingURL, writingURL) }
        }

        public func coordinate(
            writingItemAt url1: URL, options options1: WritingOptions = [], writingItemAt url2: URL,
            options options2: WritingOptions = [], error outError: NSErrorPointer, byAccessor writer: (URL, URL) -> Void
        ) {
            claimed([(url1, .writing), (url2, .writing)], outError) { writer(url1, url2) }
        }

        /// Apple tells presenters of a move made under a writing claim;
        /// ScopeFS tells every app's presenters itself: nothing to do.
        public func item(at oldURL: URL, didMoveTo newURL: URL) {}

        /// Apple cancels pending claims; ScopeFS's wait ends with `timeout`.
        public func cancel() {}

        /// Runs `body` holding `claims` (the same item once, as a writer
        /// if any claim writes), or fills `outError`.
        private func claimed(
            _ claims: [(URL, FileCoordinator.Intent)], _ outError: NSErrorPointer, _ body: () -> Void
        ) {
            var strongest: [String: (URL, FileCoordinator.Intent)] = [:]
            for (url, intent) in claims {
                let path = url.standardizedFileURL.path
                if strongest[path]?.1 != .writing { strongest[path] = (url, intent) }
            }
            let ordered = strongest.sorted { $0.key < $1.key }.map(\.value)
            do {
                try hold(ordered[...], body)
            } catch {
                outError?.pointee = Self.nsError(error)
            }
        }

        private func hold(_ claims: ArraySlice<(URL, FileCoordinator.Intent)>, _ body: () -> Void) throws {
            guard let (url, intent) = claims.first else { return body() }
            try FileCoordinator.coordinate(intent, itemAt: url, timeout: timeout, stateDirectory: stateDirectory) { _ in
                try hold(claims.dropFirst(), body)
            }
        }

        private static func nsError(_ error: any Error) -> NSError {
            guard let error = error as? ScopeFSError else { return error as NSError }
            return NSError(
                domain: NSPOSIXErrorDomain, code: Int(error.errno),
                userInfo: [NSLocalizedDescriptionKey: "\(error)", NSFilePathErrorKey: error.path])
        }
    }
#endif
