import Foundation
import SandboxProfile
import Testing

@testable import ProviderExtensions

/// Which host paths the extension's sandbox binds, and in what order
/// (bubblewrap mounts in order: a later mount hides an earlier one below
/// it). No process: the plan alone, on real folders.
@Suite struct SandboxPlanTests {
    let fixture: Fixture

    init() throws {
        fixture = try Fixture()
    }

    func resolved(_ path: String) -> String { SandboxPlan.resolve(path)! }

    @Test("a hidden state directory inside a writable folder is masked; staging is bound again over the mask")
    func maskAndRebind() throws {
        let data = try fixture.makeFolder("data")
        let state = try fixture.makeFolder("data/state")
        let staging = try fixture.makeFolder("data/state/staging")
        var plan = SandboxPlan(hidden: [resolved(state)])
        plan.add(data, writable: true, explicit: true)
        plan.add(staging, writable: true, explicit: true)
        let mounts = plan.mounts()
        let mask = try #require(mounts.firstIndex(of: .emptyFolder(resolved(state))))
        #expect(mounts[..<mask].contains(.bind(resolved(data), writable: true)))
        // staging: bound before the mask and again after it.
        #expect(mounts[..<mask].contains(.bind(resolved(staging), writable: true)))
        #expect(Array(mounts[(mask + 1)...]) == [.bind(resolved(staging), writable: true)])
    }

    @Test("a hidden file inside a bound folder is covered with /dev/null")
    func hiddenFile() throws {
        let data = try fixture.makeFolder("data")
        let database = try fixture.write("data/policy.db", "")
        var plan = SandboxPlan(hidden: [resolved(database)])
        plan.add(data, writable: false, explicit: true)
        #expect(plan.mounts().last == .emptyFile(resolved(database)))
    }

    @Test("a folder derived from the command is dropped when it lies in a hidden path; / is never bound")
    func derivedBinds() throws {
        let state = try fixture.makeFolder("state")
        let script = try fixture.write("state/extension.py", "")
        var plan = SandboxPlan(hidden: [resolved(state)])
        plan.addArgument(script, home: nil)
        plan.add("/", writable: false, explicit: true)
        #expect(plan.binds.isEmpty)
    }

    @Test("a script in the home folder shows itself, not the home folder")
    func scriptInHome() throws {
        let home = try fixture.makeFolder("home")
        try fixture.makeFolder("home/.ssh")
        let script = try fixture.write("home/extension.py", "")
        var plan = SandboxPlan(hidden: [])
        plan.addArgument(script, home: home)
        #expect(plan.binds == [SandboxPlan.Bind(path: resolved(script), writable: false)])
    }

    @Test("a program in a venv's bin shows the venv; a script in a checkout also shows its Python SDK")
    func programAndScript() throws {
        let venv = try fixture.makeFolder("venv")
        try fixture.makeFolder("venv/bin")
        let python = try fixture.write("venv/bin/python3", "")
        var plan = SandboxPlan(hidden: [])
        plan.addProgram(python, home: nil)
        plan.addArgument(Paths.folderExtension, home: nil)
        let paths = plan.binds.map(\.path)
        #expect(paths.contains(resolved(venv)))
        #expect(paths.contains(resolved(Paths.root + "/docs/examples/extensions")))
        #expect(paths.contains(resolved(Paths.root + "/clients/python")))
        #expect(plan.binds.allSatisfy { !$0.writable })
    }

    @Test("rclone's configuration folder is writable, ~/.aws read-only")
    func configuration() throws {
        let home = try fixture.makeFolder("home")
        try fixture.makeFolder("home/.aws")
        try fixture.makeFolder("home/.config/rclone")
        var plan = SandboxPlan(hidden: [])
        plan.addConfiguration(["HOME": home])
        #expect(plan.binds.contains(SandboxPlan.Bind(path: resolved(home + "/.aws"), writable: false)))
        #expect(plan.binds.contains(SandboxPlan.Bind(path: resolved(home + "/.config/rclone"), writable: true)))
    }
}

/// The parser of what extensions write: strict, bounded, exact.
@Suite struct JSONLineTests {
    @Test("integers stay exact, lone surrogates become NUL, nesting is bounded")
    func parser() {
        #expect(JSONValue.parse(Array(#"{"a": 9007199254740993}"#.utf8))?["a"] == .int(9_007_199_254_740_993))
        #expect(JSONValue.parse(Array(#""\udcff""#.utf8)) == .string("\u{0}"))
        #expect(JSONValue.parse(Array(#""\ud83d\ude00""#.utf8)) == .string("😀"))
        #expect(JSONValue.parse(Array(String(repeating: "[", count: 100_000).utf8)) == nil)
        #expect(JSONValue.parse([0x22, 0xFF, 0x22]) == nil, "not UTF-8")
        #expect(JSONValue.parse(Array("{} x".utf8)) == nil)
        #expect(JSONValue.parse(Array(#"{"a":1.5e3,"b":[true,null,"x\n"]}"#.utf8))?["b"]?.array?.count == 3)
    }

    @Test("what the host writes reads back the same, one line")
    func roundTrip() {
        let value: JSONValue = .object([
            "name": .string("a \"quoted\"\nname\u{1}"), "n": .int(-3), "f": .double(0.25),
            "list": .array([.null, .bool(false)]),
        ])
        let encoded = value.encoded
        #expect(!encoded.contains(UInt8(ascii: "\n")))
        #expect(JSONValue.parse(encoded) == value)
    }

    @Test("a line splitter cuts a long line once and skips its rest")
    func splitter() {
        var splitter = LineSplitter(limit: 4)
        let bytes = Array("ab\nabcdefgh\ncd".utf8)
        let pieces = bytes.withUnsafeBufferPointer { splitter.feed($0) }
        guard pieces.count == 2, case .line(let first) = pieces[0], case .tooLong(let start) = pieces[1] else {
            Issue.record("\(pieces)")
            return
        }
        #expect(first == Array("ab".utf8) && start == Array("abcd".utf8))
        #expect(splitter.rest() == Array("cd".utf8))
    }
}
