import Foundation
import ScopeFSClient

/// What the apps of the corpus share (the Python and C apps have the same):
/// the command line `APP [--fixed] DOCUMENT`, the document relative to
/// `$SCOPEFS_MOUNT` (the app's view of the mount, set by `scopefs run`),
/// and one wait, for the revoke the test makes once the app printed READY.
public enum CorpusApp {
    /// `--fixed`: the twin without the bug.
    public static let fixed = CommandLine.arguments.dropFirst().contains("--fixed")

    /// The document's path.
    public static var document: URL {
        let relative = CommandLine.arguments.dropFirst().first { $0 != "--fixed" } ?? ""
        let mount = ProcessInfo.processInfo.environment["SCOPEFS_MOUNT"] ?? "."
        return URL(fileURLWithPath: mount).appendingPathComponent(relative)
    }

    /// A line on standard output, written at once (a test reads it while the app runs).
    public static func say(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }

    /// Waits until the grant covering the document is revoked, as
    /// `user.scopefs.grant-state` says (read by `ScopeFS.referenceInfo`):
    /// a control attribute, never denied (SPEC S9), so the wait itself
    /// makes no denial. Once it does, the revoke is in force for the next
    /// read, a page in the kernel's cache included (SPEC S14).
    public static func waitUntilRevoked(_ url: URL, seconds: Double = 10) {
        let deadline = Date().addingTimeInterval(seconds)
        while (try? ScopeFS.referenceInfo(for: url).grantState) != "revoked" {
            if Date() > deadline {
                FileHandle.standardError.write(Data("the test never revoked the document\n".utf8))
                exit(2)
            }
            usleep(10_000)
        }
    }
}
