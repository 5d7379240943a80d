import CPortalBus
import Foundation
import Glibc
import Processes

/// org.freedesktop.portal.Documents on the bus: reads each call's
/// arguments, checks who is calling, runs the method on `DocumentPortal`
/// and writes the reply or a D-Bus error.
final class DocumentsObject {
    let portal: DocumentPortal
    /// The methods a caller that is not the owner's may use: the mount
    /// point is no secret.
    private static let openToEveryone: Set<String> = ["GetMountPoint"]

    init(portal: DocumentPortal) {
        self.portal = portal
    }

    /// sd-bus's entry: 1 (replied) or a negative errno with `error` set.
    func handle(_ message: OpaquePointer, _ busError: UnsafeMutablePointer<sd_bus_error>?) -> Int32 {
        let method = sd_bus_message_get_member(message).map { String(cString: $0) } ?? ""
        do throws(PortalError) {
            if !Self.openToEveryone.contains(method) { try checkCaller(message) }
            let reply = try ReplyWriter(replyingTo: message)
            try run(method, ArgumentReader(message: message), reply)
            try reply.send()
            return 1
        } catch {
            return sd_bus_error_set(busError, error.name, error.message)
        }
    }

    /// The portal acts with the owner's rights: it answers the owner's own
    /// processes, never another user's nor an app process of a `scopefs
    /// run` (which could otherwise grant itself what it names, SPEC S5).
    private func checkCaller(_ message: OpaquePointer) throws(PortalError) {
        try OwnerCaller.check(
            message, callers: portal.callers, otherUser: "the document store serves its owner's processes only",
            appProcess: "app processes of scopefs run cannot change the document store")
    }

    private func run(_ method: String, _ arguments: ArgumentReader, _ reply: ReplyWriter) throws(PortalError) {
        switch method {
        case "GetMountPoint":
            try reply.path(portal.mountPoint)
        case "Add":
            let file = try portal.exportedFile(descriptor: try arguments.descriptor(), sender: nil)
            var flags: DocumentPortal.AddFlags = try arguments.bool() ? [.reuseExisting] : []
            if try arguments.bool() { flags.insert(.persistent) }
            try reply.string(try portal.add([file], flags: flags, app: "", permissions: []).first!.id)
        case "AddNamed":
            let folder = try arguments.descriptor()
            let file = try portal.exportedFile(descriptor: folder, name: try arguments.path(), sender: nil)
            var flags: DocumentPortal.AddFlags = try arguments.bool() ? [.reuseExisting] : []
            if try arguments.bool() { flags.insert(.persistent) }
            try reply.string(try portal.add([file], flags: flags, app: "", permissions: []).first!.id)
        case "AddFull":
            let descriptors = try arguments.descriptors()
            let flags = DocumentPortal.AddFlags(rawValue: try arguments.uint32())
            let (app, permissions) = (try arguments.string(), try arguments.strings())
            var files: [ExportedFile] = []
            for fd in descriptors { files.append(try portal.exportedFile(descriptor: fd, sender: nil)) }
            let documents = try portal.add(files, flags: flags, app: app, permissions: permissions)
            try reply.strings(documents.map(\.id))
            try reply.mountPointExtra(portal.mountPoint)
        case "AddNamedFull":
            let folder = try arguments.descriptor()
            let file = try portal.exportedFile(descriptor: folder, name: try arguments.path(), sender: nil)
            let flags = DocumentPortal.AddFlags(rawValue: try arguments.uint32())
            let (app, permissions) = (try arguments.string(), try arguments.strings())
            try reply.string(try portal.add([file], flags: flags, app: app, permissions: permissions).first!.id)
            try reply.mountPointExtra(portal.mountPoint)
        case "GrantPermissions":
            let (id, app, permissions) = (try arguments.string(), try arguments.string(), try arguments.strings())
            try portal.grantPermissions(id, app: app, permissions: permissions)
        case "RevokePermissions":
            let (id, app, permissions) = (try arguments.string(), try arguments.string(), try arguments.strings())
            try portal.revokePermissions(id, app: app, permissions: permissions)
        case "Delete":
            try portal.delete(try arguments.string())
        case "Lookup":
            try reply.string(try portal.lookup(try arguments.path()))
        case "Info":
            let (path, apps) = try portal.info(try arguments.string())
            try reply.path(path)
            try reply.container("a", "{sas}") { () throws(PortalError) in
                for (app, permissions) in apps.sorted(by: { $0.key < $1.key }) {
                    try reply.container("e", "sas") { () throws(PortalError) in
                        try reply.string(app)
                        try reply.strings(permissions)
                    }
                }
            }
        case "List":
            try reply.pathsByID(try portal.list(app: try arguments.string()))
        case "GetHostPaths":
            try reply.pathsByID(portal.hostPaths(try arguments.strings()))
        default:
            throw PortalError(name: "org.freedesktop.DBus.Error.UnknownMethod", message: "no method \(method)")
        }
    }
}
