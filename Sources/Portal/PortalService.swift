import CPortalBus
import CommandErrors
import Foundation
import Glibc
import PolicyStore

/// `scopefs portal`: owns org.freedesktop.portal.Documents on the session
/// bus and serves it until killed. A lost bus (the session's dbus-daemon
/// restarted or gone) is not the end: the service reconnects every
/// second and takes the name again, so clients' next call finds it.
public final class PortalService {
    public static let busName = "org.freedesktop.portal.Documents"
    public static let objectPath = "/org/freedesktop/portal/documents"

    private let object: DocumentsObject
    private let log: (String) -> Void

    public init(state: StateDirectory, mountPoint: String, log: @escaping (String) -> Void) {
        self.object = DocumentsObject(portal: DocumentPortal(state: state, mountPoint: mountPoint))
        self.log = log
    }

    /// Whether the name was ever owned: before that, a failure ends the
    /// command (no session bus, the name taken); after, it is a lost bus.
    private var served = false

    /// Serves until the process ends; throws only when the first
    /// connection fails.
    public func run() throws(CommandError) -> Never {
        while true {
            do throws(CommandError) {
                try serveOneConnection()
            } catch {
                if !served { throw error }
                log("portal: \(error.message); connecting again in 1 s")
            }
            sleep(1)
        }
    }

    /// Connects, takes the name and processes calls until the bus goes.
    private func serveOneConnection() throws(CommandError) {
        var bus: OpaquePointer?
        var result = sd_bus_open_user(&bus)
        guard result >= 0, let bus else {
            throw CommandError(.noDaemon, "no session bus (\(String(cString: strerror(-result))))")
        }
        defer { sd_bus_flush_close_unref(bus) }
        let context = Unmanaged.passUnretained(object).toOpaque()
        result = scopefs_portal_add_object(
            bus, nil, Self.objectPath,
            { message, context, error in
                guard let message, let context else { return -EINVAL }
                return Unmanaged<DocumentsObject>.fromOpaque(context).takeUnretainedValue().handle(message, error)
            }, context)
        guard result >= 0 else {
            throw CommandError(
                .internalError, "cannot add the Documents object (\(String(cString: strerror(-result))))")
        }
        result = sd_bus_request_name(bus, Self.busName, 0)
        guard result >= 0 else {
            throw CommandError(
                .refused,
                "cannot own \(Self.busName) (\(String(cString: strerror(-result)))): another document portal runs; see docs/PORTAL.md"
            )
        }
        served = true
        log("portal: serving \(Self.busName) at \(Self.objectPath), mount point \(object.portal.mountPoint)")
        while true {
            result = sd_bus_process(bus, nil)
            if result < 0 {
                throw CommandError(.noDaemon, "lost the session bus (\(String(cString: strerror(-result))))")
            }
            if result > 0 { continue }
            result = sd_bus_wait(bus, UInt64.max)
            if result < 0 && result != -EINTR {
                throw CommandError(.noDaemon, "lost the session bus (\(String(cString: strerror(-result))))")
            }
        }
    }
}
