import Foundation
import ScopeFSClient

#if canImport(Glibc)
    import Glibc
#endif

/// Reads `document` every 50 ms, each time as a well-behaved app does:
/// it finds the document again through its bookmark (so it follows a
/// rename or move, SPEC S26), starts accessing it for the read and stops
/// after (SPEC S6-S8). A failed read is retried; losing access (EPERM: the
/// grant was revoked, SPEC S14) ends the app cleanly. Returns the exit
/// status: 0 after losing access, 1 when nothing happened for 20 s.
func readUntilAccessIsLost(_ document: URL) -> Int32 {
    let bookmark: String
    do {
        bookmark = try document.withSecurityScopedAccess { try ScopeFS.bookmark(for: document) }
    } catch {
        say("cannot bookmark the document: \(error)")
        return 1
    }
    say("READY")
    var current = ""
    for _ in 0..<400 {
        do {
            let found = try ScopeFS.resolveBookmark(bookmark)
            if found.providerPath != current {
                current = found.providerPath
                say("reading \(current)")
            }
            _ = try found.url.withSecurityScopedAccess { try contents(of: found.url.path) }
        } catch let error as ScopeFSError where error.kind == .denied {
            say("lost access: EPERM")
            return 0
        } catch let error as ReadError where error.code == EPERM {
            say("lost access: EPERM")
            return 0
        } catch {
            say("read failed: \(error)")
        }
        usleep(50_000)
    }
    say("gave up waiting")
    return 1
}

/// The bug this example's tests catch: the document is opened once, its
/// descriptor kept for good, and a failed read is taken to be impossible
/// (`try!`). Once the grant is revoked the next read fails with EPERM
/// (SPEC S14) and the app crashes.
func readThroughOneDescriptor(_ document: URL) -> Int32 {
    let (handle, name) = try! document.withSecurityScopedAccess {
        (try FileHandle(forReadingFrom: document), try ScopeFS.resolveBookmark(ScopeFS.bookmark(for: document)))
    }
    say("READY")
    say("reading \(name.providerPath)")
    for _ in 0..<400 {
        try! handle.seek(toOffset: 0)
        _ = try! handle.readToEnd()
        usleep(50_000)
    }
    say("gave up waiting")
    return 1
}

/// Prints a line at once: under test, standard output is a file, which
/// `print` would fill a buffer at a time, and the test waits for each line.
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

/// A failed open or read, with its errno; prints as the errno's name.
struct ReadError: Error, CustomStringConvertible {
    let code: Int32

    var description: String {
        switch code {
        case EPERM: "EPERM"
        case EIO: "EIO"
        case ENOENT: "ENOENT"
        case ENOSPC: "ENOSPC"
        case ETIMEDOUT: "ETIMEDOUT"
        default: "errno \(code)"
        }
    }
}

/// The whole file, read with open(2) and read(2) so that the errno of a
/// failure is the one the file system gave.
func contents(of path: String) throws(ReadError) -> Data {
    let descriptor = open(path, O_RDONLY | O_CLOEXEC)
    guard descriptor >= 0 else { throw ReadError(code: errno) }
    defer { close(descriptor) }
    var data = Data()
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        let count = read(descriptor, &buffer, buffer.count)
        guard count >= 0 else { throw ReadError(code: errno) }
        if count == 0 { return data }
        data.append(contentsOf: buffer[..<count])
    }
}
