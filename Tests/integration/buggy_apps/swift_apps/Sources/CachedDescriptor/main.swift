// Caches a descriptor: opens its document once and keeps reading through
// that descriptor. After a revoke the read fails with EPERM (SPEC S14);
// the buggy app reads with `try!` and crashes. The fixed twin closes the
// descriptor, tells the user and ends cleanly.
import CorpusApp
import Foundation
import ScopeFSClient

let document = CorpusApp.document
guard document.startAccessingSecurityScopedResource() else {
    CorpusApp.say("no access")
    exit(1)
}
defer { document.stopAccessingSecurityScopedResource() }
let handle = try FileHandle(forReadingFrom: document)
_ = try handle.read(upToCount: 64)
CorpusApp.say("READY")
CorpusApp.waitUntilRevoked(document)
try handle.seek(toOffset: 0)
if CorpusApp.fixed {
    do {
        _ = try handle.read(upToCount: 64)
        CorpusApp.say("still readable")
    } catch {
        try? handle.close()  // FIXED: the descriptor is dropped, the user told
        CorpusApp.say("lost access to the document")
    }
} else {
    _ = try! handle.read(upToCount: 64)  // BUG: the cached descriptor's EPERM crashes the app
    CorpusApp.say("lost access to the document")
}
