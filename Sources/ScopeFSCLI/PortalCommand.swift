import ArgumentParser
import CommandErrors
import Control
import Daemon
import Foundation
import Glibc
import Launcher
import Portal

/// `scopefs portal` (SPEC S45, docs/PORTAL.md): ScopeFS as the desktop's
/// document store, so `flatpak document-*` and portal-aware apps change
/// ScopeFS grants.
struct PortalCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "portal",
        abstract: "Serve org.freedesktop.portal.Documents on the session bus; its documents are ScopeFS grants.",
        discussion: "Runs until killed. See docs/PORTAL.md for making it the desktop's document store.")
    @OptionGroup var options: StateOptions
    @Option(help: "The mount point GetMountPoint names (default: $XDG_RUNTIME_DIR/doc, else /run/user/UID/doc).")
    var mountpoint: String?
    @Flag(help: "Serve the bus only: mount no document layout (GetMountPoint still names the mount point).")
    var noMount = false

    func run() throws {
        try report { () throws(CommandError) in
            // The portal grants with the owner's rights: never from inside a run (SPEC S5).
            try OwnerCheck.requireOutsideRuns(to: "serve the document portal")
            let state = options.directory
            guard FileManager.default.fileExists(atPath: state.databasePath) else {
                throw CommandError(.noInput, "no ScopeFS state at \(state.path); run `scopefs init` first")
            }
            let runtime = ProcessInfo.processInfo.environment["XDG_RUNTIME_DIR"].flatMap { $0.isEmpty ? nil : $0 }
            let chosen = mountpoint ?? ((runtime ?? "/run/user/\(getuid())") + "/doc")
            guard chosen.hasPrefix("/") else { throw CommandError(.usage, "--mountpoint must be an absolute path") }
            let resolved = URL(fileURLWithPath: chosen).standardizedFileURL.path
            let service = PortalService(
                state: state, mountPoint: resolved, policy: try Self.policy(options), log: { note($0) })
            if noMount { try service.runBusOnly() }
            // A layout left by a portal that was killed (SIGKILL, a crash)
            // answers ENOTCONN until detached: detach it, as `scopefs
            // mount` does, so the next start needs no `fusermount3 -u`.
            if try MountPoint.clearDead(resolved) { note("portal: detached the dead mount at \(resolved)") }
            // Like xdg-document-portal: the mount point is made when missing (0700).
            if !FileManager.default.fileExists(atPath: resolved) {
                try? FileManager.default.createDirectory(
                    atPath: resolved, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            }
            try service.runWithLayout()
        }
    }

    /// The portal's view of the isolation layer (decision 65). Its layout
    /// checks each read against the version this host's daemon publishes
    /// (`ServedPolicyPage`) and denies every document while the daemon
    /// fails closed; with no daemon, against the store's own version.
    static func policy(_ options: StateOptions) throws(CommandError) -> PortalPolicy {
        let state = options.directory
        // Its changes are this host's log's too, as the CLI's (`scopefs events`).
        guard let fleet = try options.fleetStoreForChange() else {
            return .local(try options.backend().localRepository(), state: state)
        }
        return .served(state: state, store: fleet) { () throws(CommandError) in try fleet.fleet.policyVersion() }
    }
}
