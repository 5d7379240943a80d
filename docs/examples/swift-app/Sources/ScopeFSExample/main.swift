// Example app for the ScopeFSClient library (docs/CLIENTS.md, SPEC S31).
//
// Usage: `scopefs-example PATH`, as an app process (Package.swift has the
// commands that build and run it).
//
// Shows strict mode (SPEC S9): before start the read fails with EPERM; after
// start it works and the scope count is 1; after stop the count is 0. For a
// folder it prints the first entry instead of the first line. A container
// path needs no scope, so start returns false and the count is "not-needed".
// The output format is the same for the Swift, C and Python examples.
import Foundation
import ScopeFSClient

/// The errno behind a Foundation file error (the NSPOSIXErrorDomain error
/// that Foundation puts under NSUnderlyingErrorKey), as a name.
func errnoName(of error: Error) -> String {
    var nsError = error as NSError
    while nsError.domain != NSPOSIXErrorDomain,
          let underlying = nsError.userInfo[NSUnderlyingErrorKey] as? NSError {
        nsError = underlying
    }
    guard nsError.domain == NSPOSIXErrorDomain else { return "error \(error)" }
    switch Int32(nsError.code) {
    case EPERM: return "EPERM"
    case ENOENT: return "ENOENT"
    case EACCES: return "EACCES"
    case EISDIR: return "EISDIR"
    case ENOTDIR: return "ENOTDIR"
    default: return "errno \(nsError.code)"
    }
}

/// The first line of a file, or the first entry (by name) of a folder.
func firstLine(of url: URL) throws -> (label: String, text: String) {
    var isDirectory: ObjCBool = false
    if FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory), isDirectory.boolValue {
        let entries = try FileManager.default.contentsOfDirectory(atPath: url.path).sorted()
        return ("first entry", entries.first ?? "(empty)")
    }
    let handle = try FileHandle(forReadingFrom: url)
    defer { try? handle.close() }
    let data = try handle.read(upToCount: 4096) ?? Data()
    let text = String(decoding: data, as: UTF8.self)
    return ("first line", text.split(separator: "\n", omittingEmptySubsequences: false).first.map(String.init) ?? "")
}

func describeCount(_ url: URL) -> String {
    do {
        return try ScopeFS.scopeCount(url).map(String.init) ?? "not-needed"
    } catch {
        return "error \(error.errnoName)"
    }
}

let arguments = CommandLine.arguments
guard arguments.count == 2 else {
    FileHandle.standardError.write(Data("usage: \(arguments[0]) PATH\n".utf8))
    exit(64)
}
let url = URL(fileURLWithPath: arguments[1])

print("path: \(url.path)")
print("scope count before: \(describeCount(url))")
do {
    _ = try firstLine(of: url)
    print("read before start: ok")
} catch {
    print("read before start: \(errnoName(of: error))")
}

// Apple's names: true when a scope was counted; false when none is needed
// (container path) or when the start failed; like on iOS, a failed start
// shows up as EPERM on the read below. `ScopeFS.startAccessing(_:)` throws a
// ScopeFSError carrying errno instead.
let started = url.startAccessingSecurityScopedResource()
print("start accessing: \(started)")
print("scope count during: \(describeCount(url))")

var status: Int32 = 0
do {
    let (label, text) = try firstLine(of: url)
    print("\(label): \(text)")
} catch {
    print("first line: error \(errnoName(of: error))")
    status = 1
}

if started {
    url.stopAccessingSecurityScopedResource()
    print("stop accessing: done")
}
print("scope count after: \(describeCount(url))")
exit(status)
