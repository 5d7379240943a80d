// Exercises the ScopeFSClient API as an app process and prints one JSON
// object with what each call returned; test_clients.py asserts on it.
//
//   scopefs-client-check basic GRANTED_FILE CONTAINER_DIR INVISIBLE_PATH
//   scopefs-client-check budget GRANTED_FILE
//   scopefs-client-check denied GRANTED_FILE
//   scopefs-client-check bookmark-create FILE CONTAINER_DIR
//   scopefs-client-check bookmark-resolve TOKEN...
//   scopefs-client-check pick TYPE...          (DocumentPicker.present, issue 17)
//   scopefs-client-check story                 (issue 17's example app: pick, read, rename, coordinate)
//   scopefs-client-check presenter FILE        (FilePresenter: changed, then save before relinquish)
//   scopefs-client-check bytes-resolve TOKEN   (issue 16: paths that are not UTF-8, opened by their bytes)
//   scopefs-client-check bytes-pick
//   scopefs-client-check bytes-watch
//   scopefs-client-check query N               (MetadataQuery: gathering, then N updates, issue 17)
//   scopefs-client-check promised FOLDER       (promised metadata of each file, metadata-only reads, S50)
//   scopefs-client-check apple-...             (Apple-shaped code: AppleShapes.swift, issue 31)
import Foundation
import ScopeFSClient

struct Marker: Error {}

func describe(_ result: ScopeFS.StartResult) -> String {
    switch result {
    case .started(let count): return "started \(count)"
    case .notNeeded: return "not-needed"
    }
}

func describe(_ result: ScopeFS.StopResult) -> String {
    switch result {
    case .stopped(let count): return "stopped \(count)"
    case .unbalanced: return "unbalanced"
    case .notNeeded: return "not-needed"
    }
}

func describe(_ error: ScopeFSError) -> String {
    "\(error.kind) \(error.errnoName)"
}

/// Runs a throwing call and describes its outcome or its typed error.
func outcome(_ body: () throws(ScopeFSError) -> String) -> String {
    do { return try body() } catch { return "error " + describe(error) }
}

func count(_ url: URL) -> String {
    outcome { () throws(ScopeFSError) -> String in
        try ScopeFS.scopeCount(url).map(String.init) ?? "nil"
    }
}

func canRead(_ url: URL) -> Bool {
    (try? Data(contentsOf: url)) != nil
}

/// The file at the URL's exact path bytes (`withHostPath`), read with
/// open(2): Foundation would open another name when it is not UTF-8.
func readExactly(_ url: URL) -> [UInt8]? {
    let fd = url.withHostPath { open($0, O_RDONLY) }
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var data: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        let n = read(fd, &buffer, buffer.count)
        if n <= 0 { break }
        data += buffer[0..<n]
    }
    return data
}

func hex(_ bytes: [UInt8]?) -> String {
    bytes.map { $0.map { String(format: "%02x", $0) }.joined() } ?? "unreadable"
}

/// What test_names_bytes.py compares: the path's bytes, the content read
/// in scope (SPEC S6) through them, and read again under a coordinated
/// read claim on the URL (SPEC S27b: the path goes back to the daemon).
func exactReport(_ url: URL) -> [String: String] {
    let started = url.startAccessingSecurityScopedResource()
    defer { if started { url.stopAccessingSecurityScopedResource() } }
    let coordinated: String
    do {
        coordinated = try FileCoordinator.coordinate(.reading, itemAt: url, timeout: 5) { hex(readExactly($0)) }
    } catch {
        coordinated = "error \(error)"
    }
    return [
        "path": hex(url.hostPathBytes), "started": String(started), "dataHex": hex(readExactly(url)),
        "coordinated": coordinated,
    ]
}

var report: [String: String] = [:]
let args = CommandLine.arguments
let mode = args.count > 1 ? args[1] : ""

// Apple-shaped code (AppleShapes.swift, issue 31) first.
if args.count > 1, try runAppleShape(args) { exit(0) }

switch mode {
case "basic" where args.count == 5:
    let file = URL(fileURLWithPath: args[2])
    let container = URL(fileURLWithPath: args[3])
    let invisible = URL(fileURLWithPath: args[4])

    report["count0"] = count(file)
    report["read0"] = String(canRead(file))
    report["start1"] = outcome { () throws(ScopeFSError) -> String in describe(try ScopeFS.startAccessing(file)) }
    report["start2"] = outcome { () throws(ScopeFSError) -> String in describe(try ScopeFS.startAccessing(file)) }
    report["count2"] = count(file)
    report["property2"] = file.scopeCount.map(String.init) ?? "nil"
    report["stop1"] = outcome { () throws(ScopeFSError) -> String in describe(try ScopeFS.stopAccessing(file)) }
    report["stop0"] = outcome { () throws(ScopeFSError) -> String in describe(try ScopeFS.stopAccessing(file)) }
    report["stopExtra"] = outcome { () throws(ScopeFSError) -> String in describe(try ScopeFS.stopAccessing(file)) }

    // Apple's names.
    report["appleStart"] = String(file.startAccessingSecurityScopedResource())
    report["appleCount"] = count(file)
    report["appleRead"] = String(canRead(file))
    file.stopAccessingSecurityScopedResource()
    report["appleCountAfter"] = count(file)
    report["appleReadAfter"] = String(canRead(file))

    // The scoped helper: in scope inside, stopped after a normal return and after a throw.
    report["withValue"] = (try? file.withSecurityScopedAccess { "\(count(file)) \(canRead(file))" }) ?? "threw"
    report["withAfter"] = count(file)
    do {
        try file.withSecurityScopedAccess { () throws -> Void in
            report["withInside"] = count(file)
            throw Marker()
        }
        report["withThrow"] = "did not throw"
    } catch is Marker {
        report["withThrow"] = "Marker"
    } catch {
        report["withThrow"] = "\(error)"
    }
    report["withThrowAfter"] = count(file)

    // Container paths need no scope (SPEC S9).
    report["containerStart"] = outcome { () throws(ScopeFSError) -> String in
        describe(try ScopeFS.startAccessing(container))
    }
    report["containerApple"] = String(container.startAccessingSecurityScopedResource())
    report["containerProperty"] = container.scopeCount.map(String.init) ?? "nil"
    report["containerStop"] = outcome { () throws(ScopeFSError) -> String in
        describe(try ScopeFS.stopAccessing(container))
    }
    report["containerWith"] = (try? container.withSecurityScopedAccess { "ran" }) ?? "threw"

    // Invisible paths (SPEC S2): ENOENT.
    report["invisibleStart"] = outcome { () throws(ScopeFSError) -> String in
        describe(try ScopeFS.startAccessing(invisible))
    }
    report["invisibleApple"] = String(invisible.startAccessingSecurityScopedResource())
    report["invisibleProperty"] = invisible.scopeCount.map(String.init) ?? "nil"
    do {
        _ = try invisible.withSecurityScopedAccess { "ran" }
        report["invisibleWith"] = "ran"
    } catch let error as ScopeFSError {
        report["invisibleWith"] = "error " + describe(error)
    } catch {
        report["invisibleWith"] = "\(error)"
    }

    // Not a file URL.
    report["httpStart"] = outcome { () throws(ScopeFSError) -> String in
        describe(try ScopeFS.startAccessing(URL(string: "https://example.com/x")!))
    }

case "budget" where args.count == 3:
    // Start until the budget is used up (SPEC S10); stays so after stops.
    let file = URL(fileURLWithPath: args[2])
    var successes = 0
    var failure = "none"
    for _ in 0..<100_000 {
        do {
            try ScopeFS.startAccessing(file)
            successes += 1
        } catch {
            failure = describe(error)
            break
        }
    }
    report["successes"] = String(successes)
    report["failure"] = failure
    report["apple"] = String(file.startAccessingSecurityScopedResource())
    report["stop"] = outcome { () throws(ScopeFSError) -> String in describe(try ScopeFS.stopAccessing(file)) }
    report["afterStop"] = outcome { () throws(ScopeFSError) -> String in describe(try ScopeFS.startAccessing(file)) }

case "denied" where args.count == 3:
    // The grant is revoked (SPEC S14): EPERM.
    let file = URL(fileURLWithPath: args[2])
    report["start"] = outcome { () throws(ScopeFSError) -> String in describe(try ScopeFS.startAccessing(file)) }
    report["apple"] = String(file.startAccessingSecurityScopedResource())
    do {
        _ = try file.withSecurityScopedAccess { "ran" }
        report["with"] = "ran"
    } catch let error as ScopeFSError {
        report["with"] = "error " + describe(error)
    } catch {
        report["with"] = "\(error)"
    }

case "bookmark-create" where args.count == 4:
    // Apple's names for read-write and read-only bookmarks; a container path needs none.
    let file = URL(fileURLWithPath: args[2])
    let container = URL(fileURLWithPath: args[3])
    func make(_ url: URL, _ options: URL.BookmarkCreationOptions) -> String {
        do {
            return String(decoding: try url.bookmarkData(options: options), as: UTF8.self)
        } catch let error as ScopeFSError {
            return "error " + error.errnoName
        } catch {
            return "error \(error)"
        }
    }
    report["rw"] = make(file, [.withSecurityScope])
    report["ro"] = make(file, [.withSecurityScope, .securityScopeAllowOnlyReadAccess])
    report["container"] = make(container, [.withSecurityScope])
    report["typed"] = outcome { () throws(ScopeFSError) -> String in
        try ScopeFS.bookmark(for: file) == report["rw"] ? "same" : "different"
    }

case "bookmark-resolve" where args.count >= 3:
    // Each token: Apple's initializer, cross-checked with the typed API.
    var results: [String] = []
    for token in args[2...] {
        var isStale = false
        do {
            let url = try URL(
                resolvingBookmarkData: Data(token.utf8), options: [.withSecurityScope],
                relativeTo: nil, bookmarkDataIsStale: &isStale)
            let typed = try ScopeFS.resolveBookmark(token)
            guard typed.url == url, typed.isStale == isStale else {
                results.append("mismatch \(url.path) \(typed.url.path)")
                continue
            }
            results.append("\(url.path) \(isStale) \(typed.access)")
        } catch let error as ScopeFSError {
            results.append("error \(error.errnoName)")
        } catch {
            results.append("error \(error)")
        }
    }
    report["results"] = results.joined(separator: "\n")

case "story":
    // Issue 17's "done when": present a picker, read the URL in scope, hear
    // of a host rename with the new URL, coordinate a write with another app.
    func say(_ object: [String: Any]) {
        let data = try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
        print(String(decoding: data, as: UTF8.self))
        fflush(nil)
    }
    let presenter = try DocumentPresenter()
    var url = try await DocumentPicker.present(mode: .open, contentTypes: ["public.plain-text"])[0]
    let started = url.startAccessingSecurityScopedResource()
    say(["picked": url.path, "content": (try? String(contentsOf: url, encoding: .utf8)) ?? "unreadable"])
    while let notice = try presenter.next(timeout: 15) {
        if notice.kind == .moved {
            url = notice.url
            break
        }
    }
    say(["moved": url.path])
    try FileCoordinator.coordinate(.writing, itemAt: url, timeout: 15) { target in
        try "edited by the Swift app\n".write(to: target, atomically: true, encoding: .utf8)
    }
    say(["wrote": Date().timeIntervalSince1970])
    if started { url.stopAccessingSecurityScopedResource() }
    exit(0)

case "presenter" where args.count == 3:
    // A FilePresenter of FILE under a read claim: one JSON line per
    // callback; ends when asked to relinquish (issue 17).
    final class Recorder: FilePresenter {
        let presentedItemURL: URL?
        var relinquished = false
        init(_ url: URL) { presentedItemURL = url }
        func say(_ call: String) {
            print("{\"call\": \"\(call)\", \"at\": \(Date().timeIntervalSince1970)}")
            fflush(nil)
        }
        func presentedItemDidChange() { say("presentedItemDidChange") }
        func savePresentedItemChanges() { say("savePresentedItemChanges") }
        func relinquishPresentedItem() {
            say("relinquishPresentedItem")
            relinquished = true
        }
    }
    let url = URL(fileURLWithPath: args[2])
    let recorder = Recorder(url)
    let presenter = try DocumentPresenter()
    _ = FileManager.default.fileExists(atPath: url.path)  // the app has looked its document up
    try FileCoordinator.coordinate(.reading, itemAt: url, timeout: 10) { _ in
        recorder.say("holding")
        try presenter.present(recorder, timeout: 20) { recorder.relinquished }
    }
    recorder.say("released")
    exit(0)

case "pick":
    // The app presents a picker; the test's scripted agent answers.
    do {
        let urls = try await DocumentPicker.present(mode: .open, contentTypes: Array(args[2...]))
        report["paths"] = urls.map(\.path).joined(separator: "\n")
        let started = urls[0].startAccessingSecurityScopedResource()
        report["content"] = (try? String(contentsOf: urls[0], encoding: .utf8)) ?? "unreadable"
        if started { urls[0].stopAccessingSecurityScopedResource() }
    } catch {
        report["error"] = "\(error.kind) \(error.errnoName)"
    }

case "export-urls" where args.count >= 4:
    // forExporting: [URL], asCopy: container URLs, then "copy" or "move".
    do {
        let urls = args[3...].map { URL(fileURLWithPath: $0) }
        let placed = try await DocumentPicker.present(exporting: urls, asCopy: args[2] == "copy")
        report["paths"] = placed.map(\.path).joined(separator: "\n")
    } catch {
        report["error"] = "\(error.kind) \(error.errnoName)"
    }

case "bytes-resolve" where args.count == 3:
    do {
        report = exactReport(try ScopeFS.resolveBookmark(args[2]).url)
    } catch {
        report["error"] = describe(error)
    }

case "bytes-pick":
    do {
        let url = try await DocumentPicker.present(mode: .open)[0]
        report = exactReport(url)
    } catch {
        report["error"] = "\(error)"
    }

case "bytes-watch":
    do {
        let presenter = try DocumentPresenter()
        print("{\"ready\": \"true\"}")
        fflush(nil)
        while let notice = try presenter.next(timeout: 15) {
            if notice.kind == .arrived {
                report = exactReport(notice.url)
                break
            }
        }
    } catch {
        report["error"] = describe(error)
    }
case "query" where args.count == 3:
    // A live MetadataQuery: one JSON line per event, until N updates came
    // (issue 17); the test changes the app's documents meanwhile.
    func say(_ object: [String: Any]) {
        let data = try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
        print(String(decoding: data, as: UTF8.self))
        fflush(nil)
    }
    func describe(_ item: MetadataQuery.Item) -> [String: Any] {
        [
            "url": item.url.path, "local": item.urlInLocalContainer.path, "external": item.isExternalDocument,
            "display": item.containerDisplayName,
        ]
    }
    let query = MetadataQuery(searchScope: .all)
    var updates = 0
    while updates < Int(args[2])!, let event = try query.next(timeout: 20) {
        switch event {
        case .finishedGathering(let items): say(["event": "finishedGathering", "results": items.map(describe)])
        case .added(let item): say(["event": "added", "result": describe(item)])
        case .removed(let item): say(["event": "removed", "result": describe(item)])
        case .changed(let item): say(["event": "changed", "result": describe(item)])
        }
        if case .finishedGathering = event { continue }
        updates += 1
    }
    say(["done": query.results.count])
    exit(0)

case "promised" where args.count == 3:
    // A document browser (issue 53): lists a granted folder in scope and
    // reads each file's promised values in a metadata-only coordinated
    // read, which must download nothing (SPEC S50).
    let folder = URL(fileURLWithPath: args[2])
    report["started"] = String(folder.startAccessingSecurityScopedResource())
    let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
    var statuses: [String: Int] = [:]
    var previews = 0
    var failures: [String] = []
    var bytes: Int64 = 0
    let coordinator = NSFileCoordinator()
    for name in names.sorted() {
        let url = folder.appendingPathComponent(name)
        var error: NSError?
        coordinator.coordinate(readingItemAt: url, options: .immediatelyAvailableMetadataOnly, error: &error) { url in
            do throws(ScopeFSError) {
                let values = try url.promisedItemResourceValues(forKeys: Set(PromisedItemKey.allCases))
                statuses[values.downloadingStatus?.rawValue ?? "nil", default: 0] += 1
                if values.thumbnail?.prefix(4) == [0x89, 0x50, 0x4E, 0x47] { previews += 1 }
                bytes += values.fileSize ?? 0
                if values.name != name || values.contentModificationDate == nil { failures.append(name) }
            } catch {
                failures.append("\(name): \(describe(error))")
            }
        }
        if let error { failures.append("\(name): \(error)") }
    }
    report["items"] = String(names.count)
    report["previews"] = String(previews)
    report["bytes"] = String(bytes)
    report["statuses"] = statuses.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ",")
    report["failures"] = failures.prefix(5).joined(separator: "; ")

default:
    FileHandle.standardError.write(Data("usage: scopefs-client-check MODE ARGS...\n".utf8))
    exit(64)
}

let json = try JSONSerialization.data(withJSONObject: report, options: [.sortedKeys])
print(String(decoding: json, as: UTF8.self))
