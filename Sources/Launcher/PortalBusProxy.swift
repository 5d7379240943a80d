import CommandErrors
import Control
import Foundation
import Glibc
import HostText
import SandboxProfile

/// `scopefs run --portal-bus`: the app's session bus is an
/// `xdg-dbus-proxy` (Debian's) in front of the owner's, filtered to the
/// portals as Flatpak's default sandbox has it: the app may call and hear
/// `org.freedesktop.portal.*` and nothing else (no other service, no
/// owning a name), never the raw bus (SPEC S5).
///
/// The proxy runs in a sandbox of its own, the one profile every sandbox
/// has (`SandboxProfile`), which shows the system's programs, the bus's
/// socket and the proxy's folder, and a read-only
/// `/.flatpak-info` naming the app: the portal frontend attributes a call
/// to the process that connected, the proxy, and reads
/// `/proc/PID/root/.flatpak-info` of it, as it does for Flatpak's proxy.
package final class PortalBusProxy {
    /// Where the app's sandbox shows the proxy's socket.
    package static let socketInside = "/run/scopefs/bus"

    /// The proxy's socket on the host, in a folder of this run's own.
    package let socket: String
    private let folder: String
    /// The read end of the proxy's `--fd`: the proxy writes a byte to it
    /// once it listens, and exits when this end closes (the launcher's exit).
    private let sync: Int32

    /// `account`: the app account a root launcher runs the app as. The
    /// proxy runs as it too (`identity`): the bus checks that a client's
    /// claimed uid (D-Bus EXTERNAL authentication, which the proxy passes
    /// through) is the uid of the connection it sees, the proxy's.
    package init(
        app: String, appInfo: String, bubblewrap: String, environment: [String: String], account: AppAccount?,
        identity: SandboxProfile.Identity
    ) throws(CommandError) {
        guard let address = environment["DBUS_SESSION_BUS_ADDRESS"], !address.isEmpty else {
            throw CommandError(.badState, "--portal-bus needs the owner's session bus (DBUS_SESSION_BUS_ADDRESS)")
        }
        let searchPath = (environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":").map { "\($0)/xdg-dbus-proxy" }
        guard let proxy = (searchPath + ["/usr/bin/xdg-dbus-proxy"]).first(where: { access($0, X_OK) == 0 }) else {
            throw CommandError(
                .badState, "--portal-bus needs xdg-dbus-proxy, which is not installed: `apt-get install xdg-dbus-proxy`"
            )
        }
        var template = Array("/tmp/scopefs-bus-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else {
            throw CommandError(
                .internalError, "cannot make the bus proxy's folder: \(String(cString: strerror(errno)))")
        }
        folder = String(cString: made)
        socket = folder + "/bus"
        if let account { _ = chown(folder, account.uid, account.gid) }
        let info = try InheritedPipe { descriptor throws(CommandError) in
            try InheritedPipe.writeAll(Array(appInfo.utf8), to: descriptor)
        }
        defer { info.close() }
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else {
            throw CommandError(.internalError, "pipe: \(String(cString: strerror(errno)))")
        }
        _ = fcntl(ends[0], F_SETFD, FD_CLOEXEC)
        sync = ends[0]
        defer { close(ends[1]) }
        var mounts: [SandboxProfile.Mount] = [.bind(folder, writable: true)]
        if let path = Self.socketPath(of: address) { mounts.append(.bind(path, writable: true)) }
        mounts.append(.data(descriptor: info.descriptor, at: "/.flatpak-info", mode: "0444"))
        // The host's network: a bus at an abstract address is reached through it.
        let profile = SandboxProfile(
            kind: .busProxy, identity: identity, shareNetwork: true, hostname: "scopefs", mounts: mounts)
        let filter = try SeccompFilter.pipe()
        defer { filter.close() }
        let arguments = profile.commandLine(
            bubblewrap: bubblewrap, seccompDescriptor: filter.descriptor,
            command: [proxy, "--fd=\(ends[1])", address, socket] + Self.filter)
        try Self.spawn(arguments)
        var byte: UInt8 = 0
        var pollEntry = pollfd(fd: sync, events: Int16(POLLIN), revents: 0)
        guard poll(&pollEntry, 1, 10_000) == 1, read(sync, &byte, 1) == 1 else {
            stop()
            throw CommandError(.badState, "xdg-dbus-proxy did not start (is the session bus at \(address) up?)")
        }
    }

    /// The mount point `scopefs portal` uses by default, when its layout
    /// is mounted there: `$XDG_RUNTIME_DIR/doc`, else `/run/user/UID/doc`.
    package static func documentMount(_ environment: [String: String]) -> String? {
        let runtime = environment["XDG_RUNTIME_DIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/run/user/\(getuid())"
        let mount = runtime + "/doc"
        return access(mount + "/by-app", F_OK) == 0 ? mount : nil
    }

    /// Flatpak's default for a sandboxed app's session bus.
    static let filter = [
        "--filter", "--talk=org.freedesktop.portal.*", "--call=org.freedesktop.portal.*=*",
        "--broadcast=org.freedesktop.portal.*=@/org/freedesktop/portal/*",
    ]

    /// The socket file of a `unix:path=` address (the proxy's sandbox must
    /// show it); nil for an abstract socket, reached through the network
    /// namespace, which the proxy shares.
    static func socketPath(of address: String) -> String? {
        let first = address.split(separator: ";").first.map(String.init) ?? address
        guard first.hasPrefix("unix:") else { return nil }
        for pair in first.dropFirst(5).split(separator: ",") where pair.hasPrefix("path=") {
            return String(pair.dropFirst(5)).removingPercentEncoding
        }
        return nil
    }

    private static func spawn(_ argv: [String]) throws(CommandError) {
        let pointers = argv.map { $0.withHostCString { strdup($0) } } + [nil]
        defer { pointers.forEach { free($0) } }
        var child: pid_t = 0
        let result = posix_spawn(&child, pointers[0]!, nil, nil, pointers, environ)
        guard result == 0 else {
            throw CommandError(.badState, "cannot start xdg-dbus-proxy: \(String(cString: strerror(result)))")
        }
    }

    /// Ends the proxy (its `--fd` closes) and removes its folder.
    package func stop() {
        close(sync)
        unlink(socket)
        rmdir(folder)
    }
}
