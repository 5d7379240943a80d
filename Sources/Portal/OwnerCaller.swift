import CPortalBus
import Foundation
import Glibc
import Processes

/// The portal acts with the owner's rights, so both of its objects answer
/// only the owner's own processes: never another user's, nor an app
/// process of a `scopefs run` (which could otherwise name or grant itself
/// what it liked, SPEC S5). The messages say which object refused.
enum OwnerCaller {
    static func check(
        _ message: OpaquePointer, otherUser: String, appProcess: String
    ) throws(PortalError) {
        var pid: pid_t = 0
        var uid: uid_t = 0
        guard scopefs_portal_caller(message, &pid, &uid) == 0 else {
            throw .notAllowed("the caller's credentials cannot be read")
        }
        guard uid == geteuid() else { throw .notAllowed(otherUser) }
        if let cgroup = try? String(contentsOfFile: "/proc/\(pid)/cgroup", encoding: .utf8),
            cgroup.contains("/" + AppCgroups.leafPrefix)
        {
            throw .notAllowed(appProcess)
        }
    }
}
