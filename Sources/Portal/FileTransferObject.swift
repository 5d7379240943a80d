import CPortalBus
import Foundation
import Glibc
import Policy
import Processes
import Synchronization

/// org.freedesktop.portal.FileTransfer, which xdg-document-portal serves
/// beside Documents: GTK's drag-and-drop and copy-paste of files between
/// apps. The app that drags starts a transfer and adds the descriptors of
/// its files; the app it is dropped on retrieves them by the key. What an
/// app retrieves becomes a ScopeFS grant of each item (a transient
/// document, read, and write where the transfer is writable and the
/// sender's descriptor showed write), so `scopefs revoke` takes it back
/// (SPEC S45, S14); the owner's own processes get the host paths.
///
/// Unlike Documents, app processes may call it: that is what it is for.
/// Who calls is the daemon's one attribution (`CallerIdentity`, S47);
/// another user, or a caller whose app cannot be established, is refused.
final class FileTransferObject: Sendable {
    let portal: DocumentPortal

    private struct Transfer {
        /// The bus connection that started it: only it adds files or stops it.
        var sender: String
        var writable: Bool
        var autostop: Bool
        var files: [ExportedFile]
    }

    private let transfers = Mutex<[String: Transfer]>([:])
    /// Bounds (SPEC S40): transfers open at a time per sender, files per transfer.
    static let transfersPerSender = 16
    static let filesPerTransfer = 4096

    init(portal: DocumentPortal) {
        self.portal = portal
    }

    /// Who may call: the owner's processes (nil) or an app's; anyone else is refused.
    private func caller(_ message: OpaquePointer) throws(PortalError) -> AppID? {
        switch try OwnerCaller.identify(message, callers: portal.callers) {
        case .owner: return nil
        case .app(let app): return app
        case .otherUser: throw .notAllowed("file transfers serve the owner's processes and apps only")
        case .unknown(let reason): throw .notAllowed("the caller's app cannot be established: \(reason)")
        }
    }

    func handle(_ message: OpaquePointer, _ busError: UnsafeMutablePointer<sd_bus_error>?) -> Int32 {
        let method = sd_bus_message_get_member(message).map { String(cString: $0) } ?? ""
        let sender = sd_bus_message_get_sender(message).map { String(cString: $0) } ?? ""
        do throws(PortalError) {
            let app = try caller(message)
            let arguments = ArgumentReader(message: message)
            let reply = try ReplyWriter(replyingTo: message)
            var closed: String? = nil
            switch method {
            case "StartTransfer":
                try reply.string(try start(arguments, sender: sender))
            case "AddFiles":
                try add(arguments, sender: sender, app: app)
            case "RetrieveFiles":
                let key = try arguments.string()
                let (paths, ended) = try retrieve(key, by: app)
                try reply.strings(paths)
                if ended { closed = key }
            case "StopTransfer":
                let key = try arguments.string()
                try stop(key, sender: sender, byOwner: app == nil)
                closed = key
            default:
                throw PortalError(name: "org.freedesktop.DBus.Error.UnknownMethod", message: "no method \(method)")
            }
            try reply.send()
            if let closed, let bus = sd_bus_message_get_bus(message) {
                _ = scopefs_portal_emit_transfer_closed(bus, PortalService.objectPath, closed)
            }
            return 1
        } catch {
            return sd_bus_error_set(busError, error.name, error.message)
        }
    }

    private func start(_ arguments: ArgumentReader, sender: String) throws(PortalError) -> String {
        var writable = false
        var autostop = true
        try arguments.dictionary { key throws(PortalError) in
            switch key {
            case "writable":
                writable = try arguments.variant(key, "b") { () throws(PortalError) in try arguments.bool() }
            case "autostop":
                autostop = try arguments.variant(key, "b") { () throws(PortalError) in try arguments.bool() }
            default: try arguments.skipVariant()
            }
        }
        let key = String(format: "%016llx", UInt64.random(in: 1...UInt64.max))
        let started = transfers.withLock { transfers -> Bool in
            guard transfers.values.filter({ $0.sender == sender }).count < Self.transfersPerSender else { return false }
            transfers[key] = Transfer(sender: sender, writable: writable, autostop: autostop, files: [])
            return true
        }
        guard started else { throw .notAllowed("too many transfers open (\(Self.transfersPerSender))") }
        return key
    }

    private func add(_ arguments: ArgumentReader, sender: String, app: AppID?) throws(PortalError) {
        let key = try arguments.string()
        let descriptors = try arguments.descriptors()
        // Each descriptor proves the sender can reach its file (read at
        // least), or for an item of the ScopeFS mount, the rule does.
        var files: [ExportedFile] = []
        for descriptor in descriptors { files.append(try portal.exportedFile(descriptor: descriptor, sender: app)) }
        try transfers.withLock { transfers throws(PortalError) in
            guard var transfer = transfers[key] else { throw .notFound("no transfer \(key)") }
            guard transfer.sender == sender else { throw .notAllowed("only the transfer's starter adds files") }
            guard transfer.files.count + files.count <= Self.filesPerTransfer else {
                throw .notAllowed("a transfer holds at most \(Self.filesPerTransfer) files")
            }
            transfer.files += files
            transfers[key] = transfer
        }
    }

    /// The files, for `app` (nil: the owner's own process): each a grant
    /// and its path in the app's document mount, or the host path. True
    /// when the transfer ended with it (autostop).
    private func retrieve(_ key: String, by app: AppID?) throws(PortalError) -> ([String], Bool) {
        guard let transfer = transfers.withLock({ $0[key] }) else { throw .notFound("no transfer \(key)") }
        var paths: [String] = []
        for file in transfer.files {
            guard let app else {
                paths.append(file.path)
                continue
            }
            let permissions = transfer.writable && file.writable ? ["read", "write"] : ["read"]
            let flags: DocumentPortal.AddFlags =
                file.isDirectory ? [.reuseExisting, .exportDirectory] : [.reuseExisting]
            guard let document = try portal.add([file], flags: flags, app: app, permissions: permissions).first else {
                continue
            }
            paths.append(portal.mountPoint + "/" + document.id + "/" + document.name)
        }
        if transfer.autostop { transfers.withLock { _ = $0.removeValue(forKey: key) } }
        return (paths, transfer.autostop)
    }

    private func stop(_ key: String, sender: String, byOwner: Bool) throws(PortalError) {
        try transfers.withLock { transfers throws(PortalError) in
            guard let transfer = transfers[key] else { throw .notFound("no transfer \(key)") }
            guard transfer.sender == sender || byOwner else {
                throw .notAllowed("only the transfer's starter stops it")
            }
            transfers[key] = nil
        }
    }
}
