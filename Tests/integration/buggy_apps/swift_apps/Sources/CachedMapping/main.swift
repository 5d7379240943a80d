// Caches a mapping: maps its document and keeps reading the mapping.
// After a revoke the kernel drops the mapped pages (SPEC S14) and the next
// touch faults into a denied read: SIGBUS kills the buggy app. The fixed
// twin copies the content out, unmaps at once, and reads the document
// again through read(2), where a revoke is an error it can handle.
import CorpusApp
import Foundation
import ScopeFSClient

#if canImport(Glibc)
    import Glibc
#endif

let document = CorpusApp.document
guard document.startAccessingSecurityScopedResource() else {
    CorpusApp.say("no access")
    exit(1)
}
defer { document.stopAccessingSecurityScopedResource() }
let descriptor = open(document.path, O_RDONLY)
guard descriptor >= 0, let mapping = mmap(nil, 4096, PROT_READ, MAP_SHARED, descriptor, 0), mapping != MAP_FAILED
else {
    CorpusApp.say("cannot map: \(String(cString: strerror(errno)))")
    exit(1)
}
let first = mapping.load(as: UInt8.self)
if CorpusApp.fixed {
    munmap(mapping, 4096)  // FIXED: no mapping outlives the load
}
CorpusApp.say("READY")
CorpusApp.waitUntilRevoked(document)
if CorpusApp.fixed {
    var byte: UInt8 = 0
    if pread(descriptor, &byte, 1, 0) < 0 {
        CorpusApp.say("lost access to the document")
    }
} else {
    _ = mapping.load(as: UInt8.self) == first  // BUG: the cached mapping after a revoke: SIGBUS
    CorpusApp.say("lost access to the document")
}
close(descriptor)
