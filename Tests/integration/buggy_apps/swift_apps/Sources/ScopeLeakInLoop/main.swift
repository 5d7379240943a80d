// Leaks a scope in a loop: reloads its document five times, starting
// access on every pass and stopping once at the end, so it exits with
// four scopes counted: a leak (SPEC S8, S11). The fixed twin balances
// every start with a stop on the same pass.
import CorpusApp
import Foundation
import ScopeFSClient

let document = CorpusApp.document
for _ in 0..<5 {
    guard document.startAccessingSecurityScopedResource() else {
        CorpusApp.say("no access")
        exit(1)
    }
    _ = try Data(contentsOf: document)
    if CorpusApp.fixed {
        document.stopAccessingSecurityScopedResource()  // FIXED: one stop per start
    }
}
if !CorpusApp.fixed {
    document.stopAccessingSecurityScopedResource()  // BUG: one stop for five starts
}
CorpusApp.say("done")
