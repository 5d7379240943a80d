import ArgumentParser
import CommandErrors
import Control
import Daemon
import Foundation
import Glibc
import HostText
import Launcher
import PolicyStore
import Processes

struct UnmountCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unmount", abstract: "Unmount and wait for the daemon to exit.",
        discussion: """
            A daemon that has not exited within --timeout seconds of the unmount is ended (SIGTERM, then \
            SIGKILL), and `unmount` says so on standard error: a wedged daemon never makes it wait for good.
            """)
    @OptionGroup var options: StateOptions
    @Argument(completion: .directory) var mountpoint: String
    @Option(help: "Seconds to wait for the daemon to exit before ending it.") var timeout: Double = 10
    @Flag(help: "Print the mountpoint and the daemon that exited as JSON.") var json = false

    /// After SIGTERM, how long the daemon has to finish before SIGKILL;
    /// after SIGKILL, how long the kernel may take to end it.
    static let termGrace = 2.0
    static let killGrace = 5.0
    /// How long the daemon may take to say who this process is.
    static let whoamiSeconds = 2

    func run() throws {
        try report { () throws(CommandError) in
            try OwnerCheck.require(options.directory, to: "unmount", daemonSeconds: Self.whoamiSeconds)
            let normalized = Self.resolved(mountpoint)
            guard MountPoint.isMounted(normalized) else {
                throw CommandError(.notMounted, "\(normalized) is not mounted")
            }
            let daemon = DaemonInfo.read(from: options.directory).flatMap { $0.mountpoint == normalized ? $0.pid : nil }
            guard MountPoint.unmount(normalized) || MountPoint.unmount(normalized, lazy: true) else {
                throw CommandError(.ioError, "cannot unmount \(normalized) (busy?)")
            }
            if let daemon { try waitForExit(daemon, of: normalized) }
            if json {
                struct Unmounted: Encodable {
                    var mountpoint: String
                    var pid: Int32?
                }
                printJSON(Unmounted(mountpoint: normalized, pid: daemon))
            }
        }
    }

    /// The mountpoint as mountinfo names it, without a stat of it: a stat
    /// of a wedged mount's root waits for its daemon for good (issue 50).
    /// The folders above it are outside it: their links are followed.
    static func resolved(_ mountpoint: String) -> String {
        let lexical = FolderOverlap.lexical(mountpoint)
        guard lexical != "/" else { return lexical }
        let parent = (lexical as NSString).deletingLastPathComponent
        let name = (lexical as NSString).lastPathComponent
        let real = HostFiles.realPath(parent) ?? parent
        let plain = (real == "/" ? "" : real) + "/" + name
        // A link as the last name: only then is the mount's root looked at.
        if !MountPoint.isMounted(plain), let target = HostFiles.realPath(plain) { return target }
        return plain
    }

    /// Waits until the daemon has exited; past the timeout, ends it. A
    /// daemon waiting in the kernel on a request to its own mount never
    /// sees the unmount: only a fatal signal wakes that wait, and its exit
    /// ends the FUSE connection and whatever else waited on it.
    private func waitForExit(_ pid: Int32, of mountpoint: String) throws(CommandError) {
        if Self.exits(pid, within: timeout) { return }
        guard Self.isDaemon(pid, of: options.directory) else { return }
        FileHandle.standardError.write(
            Data(
                "scopefs: daemon \(pid) did not exit within \(timeout) s of the unmount of \(mountpoint.escapedForTerminal); ending it (SIGTERM, then SIGKILL after \(Self.termGrace) s)\n"
                    .utf8))
        kill(pid, SIGTERM)
        if Self.exits(pid, within: Self.termGrace) { return }
        kill(pid, SIGKILL)
        guard Self.exits(pid, within: Self.killGrace) else {
            throw CommandError(.timedOut, "daemon \(pid) did not exit even after SIGKILL")
        }
        if MountPoint.isMounted(mountpoint) { _ = MountPoint.unmount(mountpoint, lazy: true) }
    }

    /// Whether `pid` is still this state directory's daemon: a `scopefs
    /// mount` process while the state's daemon lock is held (a pid that
    /// was reused is never signalled).
    static func isDaemon(_ pid: Int32, of state: StateDirectory) -> Bool {
        guard DaemonLock.isHeld(state),
            let command = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline")
        else { return false }
        return command.split(separator: 0).contains { $0.elementsEqual("mount".utf8) }
    }

    /// Whether `pid` exits within `seconds`. A daemon started in the
    /// background is a child of init, which may reap it late: a zombie
    /// counts as gone.
    static func exits(_ pid: Int32, within seconds: Double) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while kill(pid, 0) == 0 && !isZombie(pid) {
            if Date() > deadline { return false }
            usleep(CLITunables.exitPollPeriod)
        }
        return true
    }

    static func isZombie(_ pid: Int32) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return true }
        let state = stat[stat.index(after: close)...].drop(while: { $0 == " " }).first
        return state == "Z" || state == "X"
    }
}
