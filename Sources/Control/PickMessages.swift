import Foundation
import Policy

/// What an app asks the document picker for (issue 17): Apple's
/// `UIDocumentPickerViewController(forOpeningContentTypes:)` and SwiftUI's
/// `fileImporter`, sent over the app endpoint. The app describes what it
/// wants; only the owner's agent decides what it gets.
public struct PickRequest: Codable, Sendable, Equatable {
    public enum Mode: String, Codable, Sendable, CaseIterable {
        case open
        case `import`
        case export
        case move
    }

    public var mode: Mode
    /// UTType identifiers or MIME types, shown to the user as asked.
    public var contentTypes: [String]
    public var allowsMultipleSelection: Bool
    /// Where the picker should start, as `PROVIDER:RELPATH` (a suggestion).
    public var directory: String?
    /// Export and move: the container items to place (paths in the container).
    public var items: [String]

    public init(
        mode: Mode, contentTypes: [String] = [], allowsMultipleSelection: Bool = false, directory: String? = nil,
        items: [String] = []
    ) {
        self.mode = mode
        self.contentTypes = contentTypes
        self.allowsMultipleSelection = allowsMultipleSelection
        self.directory = directory
        self.items = items
    }

    /// Limits on what a (hostile) app may send: the agent shows all of it.
    static let maximumTypes = 32
    static let maximumItems = 64
    static let maximumFieldLength = 1024

    package func validated() -> String? {
        if contentTypes.count > Self.maximumTypes { return "at most \(Self.maximumTypes) content types" }
        if items.count > Self.maximumItems { return "at most \(Self.maximumItems) items" }
        let fields = contentTypes + items + [directory ?? ""]
        if fields.contains(where: { $0.utf8.count > Self.maximumFieldLength }) {
            return "a content type, item or directory longer than \(Self.maximumFieldLength) bytes"
        }
        if (mode == .export || mode == .move) && items.isEmpty {
            return "\(mode.rawValue) needs the container items to place"
        }
        if (mode == .open || mode == .import) && !items.isEmpty { return "\(mode.rawValue) takes no items" }
        return nil
    }
}

/// A request waiting for an agent, as the agent sees it: the app comes from
/// the kernel (the requesting process's app), never from the request.
public struct PendingPick: Codable, Sendable, Equatable {
    public var id: UInt64
    public var app: AppID
    public var pid: Int32
    public var request: PickRequest

    package init(
        id: UInt64,
        app: AppID,
        pid: Int32,
        request: PickRequest
    ) {
        self.id = id
        self.app = app
        self.pid = pid
        self.request = request
    }
}

/// The agent's answer: what the user chose, already applied by the agent
/// with the owner's rights (grants, references, copies), as paths in the
/// app's view (`Providers/...`, `Container/...`); or a cancel; or a refusal.
public struct PickAnswer: Codable, Sendable, Equatable {
    public var cancelled: Bool
    public var paths: [String]
    /// Why the agent could not do what was chosen (shown to the app).
    public var error: String?

    public init(cancelled: Bool = false, paths: [String] = [], error: String? = nil) {
        self.cancelled = cancelled
        self.paths = paths
        self.error = error
    }
}
