import CPortalBus
import Foundation
import Glibc
import Processes

/// The portal acts with the owner's rights, so both of its objects answer
/// only the owner's own processes: never another user's, nor an app
/// process of a `scopefs run` (which could otherwise name or grant itself
/// what it liked, SPEC S5, S45), nor a caller whose app cannot be
/// established (fail closed). Who the caller is, is `CallerIdentity`'s to
/// say: an app given the bus with `--portal-bus` calls through its run's
/// `xdg-dbus-proxy`, which the daemon counts among the run's processes.
/// The messages say which object refused.
enum OwnerCaller {
    /// Who sent `message`, as `CallerIdentity` says from the bus's
    /// credentials of the sender: for the objects that serve apps too
    /// (FileTransfer), which decide on the answer themselves.
    static func identify(_ message: OpaquePointer, callers: CallerIdentity) throws(PortalError) -> CallerIdentity.Peer {
        var pid: pid_t = 0
        var uid: uid_t = 0
        guard scopefs_portal_caller(message, &pid, &uid) == 0 else {
            throw .notAllowed("the caller's credentials cannot be read")
        }
        return callers.identify(pid: pid, uid: uid)
    }

    static func check(
        _ message: OpaquePointer, callers: CallerIdentity, otherUser: String, appProcess: String
    ) throws(PortalError) {
        var pid: pid_t = 0
        var uid: uid_t = 0
        guard scopefs_portal_caller(message, &pid, &uid) == 0 else {
            throw .notAllowed("the caller's credentials cannot be read")
        }
        switch callers.identify(pid: pid, uid: uid) {
        case .owner: return
        case .otherUser: throw .notAllowed(otherUser)
        case .app(let app): throw .notAllowed("\(appProcess) (the caller is a process of \(app))")
        case .unknown(let reason):
            throw .notAllowed("\(appProcess) (the caller's app cannot be established: \(reason))")
        }
    }
}
