// The app under test (docs/examples/swift-testing): reads the document it
// is given again and again, as an editor that keeps a document on screen
// would. Its tests run it as an app process (`scopefs run`), with the
// document's path in the mount as its one argument: `reader-app PATH`.
//
// It prints one line per change, which its tests wait for: `READY`,
// `reading PROVIDER_PATH` (again after the document moved), `read failed:
// ERRNO` (and it tries again), `lost access: EPERM` (and it exits 0).
//
// READER_CACHES_DESCRIPTOR=1 makes it the buggy app of the same name in
// docs/examples/scenarios: it keeps one descriptor and crashes on the
// EPERM that a revocation brings (SPEC S14), which its tests catch.
import Foundation

guard CommandLine.arguments.count == 2 else {
    FileHandle.standardError.write(Data("usage: reader-app PATH\n".utf8))
    exit(64)
}
let document = URL(fileURLWithPath: CommandLine.arguments[1])
if ProcessInfo.processInfo.environment["READER_CACHES_DESCRIPTOR"] == "1" {
    exit(readThroughOneDescriptor(document))
}
exit(readUntilAccessIsLost(document))
