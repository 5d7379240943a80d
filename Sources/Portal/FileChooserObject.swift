import CPortalBus
import CommandErrors
import Control
import Foundation
import Glibc
import HostText
import Policy
import PolicyStore
import Processes

/// org.freedesktop.impl.portal.FileChooser, the backend xdg-desktop-portal
/// forwards an app's FileChooser request to: each call becomes a pick the
/// owner's `scopefs agent` answers (terminal or `--script`), attributed to
/// the app the frontend names. The reply is the impl interface's: response
/// 0 (chosen; `uris`), 1 (the user cancelled) or 2 (ended otherwise: no
/// agent, no answer in time, the request closed, the choice not applied).
/// The frontend then exports the files through the Documents portal,
/// whose AddFull and GrantPermissions are ScopeFS grants again.
///
/// Runs on the bus thread; the wait for the agent runs on a thread of its
/// own and posts the reply back (`BusMailbox`).
final class FileChooserObject {
    static let objectPath = "/org/freedesktop/portal/desktop"
    /// How long a request waits for the owner's agent (the daemon caps it too).
    static let pickWait: Double = 300

    let portal: DocumentPortal
    let mailbox: BusMailbox
    private let log: @Sendable (String) -> Void
    /// Calls waiting for their pick, by request handle: Close answers one
    /// at once (response 2) and the pick's late answer is dropped.
    private var waiting: [String: HeldMessage] = [:]

    init(portal: DocumentPortal, mailbox: BusMailbox, log: @escaping @Sendable (String) -> Void) {
        self.portal = portal
        self.mailbox = mailbox
        self.log = log
    }

    /// sd-bus's entry for OpenFile, SaveFile and SaveFiles.
    func handle(_ message: OpaquePointer, _ busError: UnsafeMutablePointer<sd_bus_error>?) -> Int32 {
        let member = sd_bus_message_get_member(message).map { String(cString: $0) } ?? ""
        do throws(PortalError) {
            guard let method = ChooserMethod(rawValue: member) else {
                throw PortalError(name: "org.freedesktop.DBus.Error.UnknownMethod", message: "no method \(member)")
            }
            try checkCaller(message)
            let arguments = ArgumentReader(message: message)
            let handle = try arguments.objectPath()
            let app = try arguments.string()
            _ = try arguments.string()  // parent_window: ScopeFS's agent has no window to stack on
            _ = try arguments.string()  // title: the agent names the app and the mode itself
            let options = try ChooserOptions(arguments)
            guard handle.hasPrefix("/org/freedesktop/portal/desktop/request/") else {
                throw .invalidArgument("\(handle) is not a request handle")
            }
            guard waiting[handle] == nil else { throw .invalidArgument("request \(handle) is already open") }
            guard !app.isEmpty else {
                throw .notAllowed(
                    "ScopeFS picks for apps run by scopefs run (sandboxed, named by /.flatpak-info); this request names no app"
                )
            }
            try DocumentPortal.validate(app: app)
            let pick = try ChooserPick(method, options: options) { [portal] folder in
                guard let (provider, path) = try? portal.grants.locate(folder) else { return nil }
                return "\(provider):\(path)"
            }
            try portal.grants.register(app)
            waiting[handle] = HeldMessage(message: sd_bus_message_ref(message))
            log("portal: \(method.rawValue) for \(app) (request \(handle)) asks the agent")
            start(pick, app: app, handle: handle)
            return 1
        } catch {
            return sd_bus_error_set(busError, error.name, error.message)
        }
    }

    /// sd-bus's entry for org.freedesktop.impl.portal.Request.Close.
    func close(_ message: OpaquePointer, _ busError: UnsafeMutablePointer<sd_bus_error>?) -> Int32 {
        do throws(PortalError) {
            try checkCaller(message)
        } catch {
            return sd_bus_error_set(busError, error.name, error.message)
        }
        let handle = sd_bus_message_get_path(message).map { String(cString: $0) } ?? ""
        if let held = waiting.removeValue(forKey: handle) {
            log("portal: request \(handle) closed before the agent answered")
            reply(held, response: 2, uris: [])
        }
        do throws(PortalError) {
            try ReplyWriter(replyingTo: message).send()
            return 1
        } catch {
            return sd_bus_error_set(busError, error.name, error.message)
        }
    }

    /// The backend answers the frontend, which runs as the owner: another
    /// user's process, and an app process of `scopefs run` (which would
    /// name any app it liked), are refused.
    private func checkCaller(_ message: OpaquePointer) throws(PortalError) {
        try OwnerCaller.check(
            message, callers: portal.callers, otherUser: "the file chooser serves its owner's processes only",
            appProcess:
                "app processes of scopefs run call org.freedesktop.portal.FileChooser, not its backend: the frontend names the app"
        )
    }

    /// Asks the agent on a thread of its own; the reply goes back through
    /// the mailbox.
    private func start(_ pick: ChooserPick, app: AppID, handle: String) {
        let state = portal.grants.state
        let store = portal.grants.store
        let request = pick.request
        let method = pick.method
        let options = pick.options
        let log = log
        let box = UncheckedBox(self)
        Thread.detachNewThread { [mailbox] in
            let outcome = Self.ask(request, app: app, state: state)
            let (response, uris) = Self.results(
                outcome, method: method, options: options, store: store, log: log)
            mailbox.post {
                let chooser = box.value
                guard let held = chooser.waiting.removeValue(forKey: handle) else { return }
                chooser.reply(held, response: response, uris: uris)
            }
        }
    }

    enum Outcome {
        case chosen([String])
        case cancelled
        case failed(String)
    }

    private static func ask(_ request: PickRequest, app: AppID, state: StateDirectory) -> Outcome {
        do {
            let response = try ControlClient.send(.pickForApp(app: app, request, wait: pickWait), state: state)
            guard let picked = response.picked else {
                return .failed(response.message ?? "the daemon answered no pick")
            }
            if picked.cancelled { return .cancelled }
            if let error = picked.error { return .failed(error) }
            guard response.ok else { return .failed(response.message ?? "the pick failed") }
            return .chosen(picked.paths)
        } catch {
            return .failed(error.message)
        }
    }

    /// The impl interface's response and URIs for an outcome: the host
    /// files of the items chosen; for SaveFile and SaveFiles, the files to
    /// save in the folder chosen (made empty when missing, so that the app
    /// can open its result at once; the Documents portal would also take a
    /// name not made yet, as a pending document).
    private static func results(
        _ outcome: Outcome, method: ChooserMethod, options: ChooserOptions, store: any IsolationStore,
        log: @Sendable (String) -> Void
    ) -> (UInt32, [String]) {
        switch outcome {
        case .cancelled: return (1, [])
        case .failed(let reason):
            log("portal: a file chooser request ended without a choice: \(reason)")
            return (2, [])
        case .chosen(let paths):
            let providers: [Provider]
            do {
                providers = try store.providers()
            } catch {
                log("portal: cannot read the providers: \(error)")
                return (2, [])
            }
            let hosts = paths.compactMap { hostPath(ofAppPath: $0, providers: providers) }
            guard hosts.count == paths.count, !hosts.isEmpty else {
                log("portal: the agent chose what is no provider item: \(paths)")
                return (2, [])
            }
            switch method {
            case .openFile:
                return (0, hosts.map(fileURI))
            case .saveFile, .saveFiles:
                let folder = hosts[0]
                let names =
                    method == .saveFile
                    ? [
                        options.currentName ?? options.currentFile.map { ($0 as NSString).lastPathComponent }
                            ?? "Untitled"
                    ]
                    : options.files.map { ($0 as NSString).lastPathComponent }
                var uris: [String] = []
                for name in names {
                    let file = (folder == "/" ? "" : folder) + "/" + name
                    let fd = file.withHostCString { open($0, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o644) }
                    guard fd >= 0 else {
                        log("portal: cannot make \(file) to save into: \(String(cString: strerror(errno)))")
                        return (2, [])
                    }
                    Glibc.close(fd)
                    uris.append(fileURI(file))
                }
                return (0, uris)
            }
        }
    }

    /// Answers a held call: `(u response, a{sv} results)`.
    private func reply(_ held: HeldMessage, response: UInt32, uris: [String]) {
        defer { sd_bus_message_unref(held.message) }
        do throws(PortalError) {
            let writer = try ReplyWriter(replyingTo: held.message)
            try writer.uint32(response)
            try writer.container("a", "{sv}") { () throws(PortalError) in
                if response == 0 {
                    try writer.container("e", "sv") { () throws(PortalError) in
                        try writer.string("uris")
                        try writer.container("v", "as") { () throws(PortalError) in try writer.strings(uris) }
                    }
                }
            }
            try writer.send()
        } catch {
            log("portal: cannot answer a file chooser request: \(error.message)")
        }
    }
}

/// Carries the chooser into the posted closure, which runs on the bus
/// thread, the only one that touches it.
struct UncheckedBox<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
