import CSystemd
import Foundation
import Glibc
import Logging
import PolicyStore

/// Where the daemon's messages and its event stream go (docs/DECISIONS.md,
/// decision 27, "journald, else a rotated file").
public enum LogDestination: String, Sendable, CaseIterable {
    /// The journal under systemd or where journald runs; else standard
    /// error in the foreground and the rotated file in the background.
    case auto
    case journal
    case file
    case stderr
}

public enum DaemonLog {
    /// Where journald takes native-protocol entries (sd_journal_sendv).
    static let journalSocket = "/run/systemd/journal/socket"
    /// A rotated file's size limit and how many older files are kept;
    /// SCOPEFS_LOG_MAX_BYTES overrides the limit.
    static let defaultMaximumBytes = 4 << 20
    static let keptFiles = 3

    public static var journalIsAvailable: Bool { access(journalSocket, W_OK) == 0 }

    /// Whether standard error is a stream into the journal: systemd sets
    /// JOURNAL_STREAM to its device and inode for a service's output.
    static var standardErrorIsJournal: Bool {
        guard let stream = ProcessInfo.processInfo.environment["JOURNAL_STREAM"] else { return false }
        var info = stat()
        guard fstat(STDERR_FILENO, &info) == 0 else { return false }
        return stream == "\(info.st_dev):\(info.st_ino)"
    }

    /// What `auto` means: a service's daemon logs to the journal; one started
    /// by hand in the foreground to the terminal; a background daemon to
    /// the journal where journald runs, else to `<state>/daemon.log`.
    public static func resolve(_ destination: LogDestination, foreground: Bool) -> LogDestination {
        guard destination == .auto else { return destination }
        if standardErrorIsJournal { return .journal }
        if foreground { return .stderr }
        return journalIsAvailable ? .journal : .file
    }

    /// Sets up swift-log for the daemon (once per process). A background
    /// daemon's standard output and error follow its log: the current
    /// rotated file, or a stream into the journal.
    public static func bootstrap(
        _ destination: LogDestination, state: StateDirectory, background: Bool,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) {
        let level = environment["SCOPEFS_LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .info
        switch destination {
        case .journal:
            if background { redirectStandardStreamsToJournal() }
            LoggingSystem.bootstrap { _ in
                var handler = JournalLogHandler()
                handler.logLevel = level
                handler[metadataKey: "state"] = .string(state.path)
                return handler
            }
        case .file:
            let limit = environment["SCOPEFS_LOG_MAX_BYTES"].flatMap(Int.init) ?? defaultMaximumBytes
            let file = RotatingLogFile(
                path: state.daemonLogPath, maximumBytes: limit, keep: keptFiles, ownsStandardStreams: background)
            LoggingSystem.bootstrap { label in
                var handler = LineLogHandler(label: label, sink: .file(file))
                handler.logLevel = level
                return handler
            }
        case .stderr, .auto:
            LoggingSystem.bootstrap { label in
                var handler = LineLogHandler(label: label, sink: .standardError)
                handler.logLevel = level
                return handler
            }
        }
    }

    private static func redirectStandardStreamsToJournal() {
        let stream = sd_journal_stream_fd("scopefs", LOG_ERR, 0)
        guard stream >= 0 else { return }
        dup2(stream, STDOUT_FILENO)
        dup2(stream, STDERR_FILENO)
        if stream > STDERR_FILENO { close(stream) }
    }
}

/// The service manager's readiness protocol (sd_notify(3)): a no-op unless
/// systemd started the daemon with NOTIFY_SOCKET (`Type=notify`).
public enum ServiceManager {
    /// The mount serves: systemd starts the units ordered after this one.
    static func ready(mountpoint: String) {
        notify("READY=1\nSTATUS=serving \(mountpoint)")
    }

    static func stopping() {
        notify("STOPPING=1\nSTATUS=unmounting")
    }

    private static func notify(_ state: String) {
        _ = sd_notify(0, state)
    }
}
