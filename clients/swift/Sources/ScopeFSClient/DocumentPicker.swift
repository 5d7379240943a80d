import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The document picker, presented by the app as on Apple's systems
/// (`UIDocumentPickerViewController`, SwiftUI's `fileImporter`): the app
/// says what it wants, the user chooses through the owner's picker agent
/// (`scopefs agent`), and the app receives URLs (docs/API.md "Asking the
/// user to pick", issue 17).
///
///     let urls = try await DocumentPicker.present(mode: .open, contentTypes: ["public.plain-text"])
///     guard urls[0].startAccessingSecurityScopedResource() else { return }
///     defer { urls[0].stopAccessingSecurityScopedResource() }
///
/// A cancel throws a `ScopeFSError` of kind `.cancelled`, as Apple's
/// delegate hears `documentPickerWasCancelled`.
public enum DocumentPicker {
    public enum Mode: String, Sendable {
        /// Security-scoped URLs of the originals (start accessing before use).
        case open
        /// Copies in the app's inbox (`Container/tmp/APP-Inbox/`).
        case `import`
        /// Copies of `items` placed in a folder the user chooses.
        case export
        /// `items` moved to a folder the user chooses; the app keeps access.
        case move
    }

    /// Waits for the user's choice. `contentTypes` are UTType identifiers or
    /// MIME types; `directoryURL` a start folder as `PROVIDER:DIR`; `items`
    /// the container items to export or move. Blocks a thread of its own,
    /// not the caller's.
    public static func present(
        mode: Mode, contentTypes: [String] = [], allowsMultipleSelection: Bool = false, directory: String? = nil,
        items: [String] = [], timeout: Double = 300, stateDirectory: String? = nil
    ) async throws(ScopeFSError) -> [URL] {
        let result: Result<[URL], ScopeFSError> = await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                continuation.resume(
                    returning: Result { () throws(ScopeFSError) in
                        try pick(mode, contentTypes, allowsMultipleSelection, directory, items, timeout, stateDirectory)
                    })
            }
        }
        return try result.get()
    }

    /// Apple's `UIDocumentPickerViewController(forExporting: urls, asCopy:)`:
    /// the container items at `urls` (in this app's view, under
    /// `$SCOPEFS_MOUNT/Container/`) are copied (`asCopy`) or moved into one
    /// folder the user chooses. Returns their new URLs, in the order of
    /// `urls`. If one item fails, the error names it, those placed before
    /// it, and those not tried (which stay in the container).
    public static func present(
        exporting urls: [URL], asCopy: Bool = true, timeout: Double = 300, stateDirectory: String? = nil
    ) async throws(ScopeFSError) -> [URL] {
        let items = try urls.map { url throws(ScopeFSError) in try containerPath(of: url) }
        return try await present(
            mode: asCopy ? .export : .move, items: items, timeout: timeout, stateDirectory: stateDirectory)
    }

    /// `Container/REL` under `$SCOPEFS_MOUNT`, or `REL` given relative to
    /// the container's own folder, as the daemon names container items.
    static func containerPath(of url: URL) throws(ScopeFSError) -> String {
        let root = (ProcessInfo.processInfo.environment["SCOPEFS_MOUNT"] ?? "") + "/Container/"
        let path = url.standardizedFileURL.path
        guard path.hasPrefix(root), path.count > root.count else {
            throw ScopeFSError(
                errno: EINVAL, operation: .pick, path: path,
                message: "export and move take items of this app's container (under \(root))")
        }
        return String(path.dropFirst(root.count))
    }

    static func pick(
        _ mode: Mode, _ contentTypes: [String], _ allowsMultipleSelection: Bool, _ directory: String?,
        _ items: [String],
        _ timeout: Double, _ stateDirectory: String?
    ) throws(ScopeFSError) -> [URL] {
        let socketPath = ControlSocket.stateDirectory(explicit: stateDirectory) + "/control.sock"
        struct Request: Encodable {
            struct Pick: Encodable {
                let mode: String
                let contentTypes: [String]
                let allowsMultipleSelection: Bool
                let directory: String?
                let items: [String]
            }
            let op = "pick"
            let pick: Pick
            let waitSeconds: Double
        }
        struct Response: Decodable {
            struct Picked: Decodable {
                let cancelled: Bool
                let paths: [String]
            }
            let ok: Bool
            let code: Int32?
            let message: String?
            let picked: Picked?
        }
        let request = Request(
            pick: .init(
                mode: mode.rawValue, contentTypes: contentTypes, allowsMultipleSelection: allowsMultipleSelection,
                directory: directory, items: items),
            waitSeconds: timeout)
        let response = try ControlSocket.ask(
            try? JSONEncoder().encode(request), as: Response.self, socketPath: socketPath, operation: .pick)
        guard response.ok, let picked = response.picked else {
            // The daemon's codes are the CLI's exit codes (docs/API.md).
            let code: Int32 =
                switch response.code {
                case 64: EINVAL
                case 69: ENXIO
                case 75: ETIMEDOUT
                case 77: EPERM
                default: EPROTO
                }
            throw ScopeFSError(errno: code, operation: .pick, path: socketPath, message: response.message)
        }
        guard !picked.cancelled else { throw ScopeFSError(errno: ECANCELED, operation: .pick, path: socketPath) }
        let root = ProcessInfo.processInfo.environment["SCOPEFS_MOUNT"].map { $0 + "/" } ?? ""
        return picked.paths.map { URL(fileURLWithPath: root + $0) }
    }
}
