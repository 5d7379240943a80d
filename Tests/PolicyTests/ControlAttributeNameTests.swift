import Foundation
import Policy
import Testing

/// The client packages mirror the control attribute names the daemon
/// answers (docs/API.md): a name the daemon does not know fails with
/// ENOTSUP in every app that uses it, so each copy is checked here.
@Suite("Control attribute names")
struct ControlAttributeNameTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let known = Set(ControlAttributeName.allCases.map(\.rawValue))

    /// The `user.scopefs.*` names a source file spells out, plus those it
    /// builds from the prefix and a short name (`read("provider")`, the C
    /// header's list of reference attribute names).
    static func names(in path: String, shortNames pattern: String? = nil) throws -> Set<String> {
        let text = try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
        var found = Set<String>()
        for pattern in [#""(user\.scopefs\.[a-z-]+)""#] + (pattern.map { [$0] } ?? []) {
            let expression = try NSRegularExpression(pattern: pattern)
            for match in expression.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
                let name = String(text[Range(match.range(at: 1), in: text)!])
                found.insert(name.hasPrefix(ControlAttributeName.prefix) ? name : ControlAttributeName.prefix + name)
            }
        }
        return found
    }

    @Test("every name starts with the prefix and is unique")
    func wellFormed() {
        #expect(ControlAttributeName.allCases.allSatisfy { $0.rawValue.hasPrefix(ControlAttributeName.prefix) })
        #expect(Self.known.count == ControlAttributeName.allCases.count)
    }

    @Test("the Python client's names are the daemon's")
    func python() throws {
        let names = try Self.names(in: "clients/python/scopefs.py", shortNames: #"\bread\("([a-z-]+)"\)"#)
        #expect(names.count >= 10)
        #expect(names.subtracting(Self.known).isEmpty, "unknown to the daemon: \(names.subtracting(Self.known))")
    }

    @Test("the C client's names are the daemon's")
    func c() throws {
        var names = try Self.names(in: "clients/c/scopefs.c").union(try Self.names(in: "clients/c/bookmarks.c"))
        // scopefs_reference_attribute takes a short name; its comment in the header lists them.
        names.formUnion(
            try Self.names(
                in: "clients/c/include/scopefs.h", shortNames: #""([a-z][a-z-]*)"(?=[^.]*\.\s*Returns a malloc)"#))
        #expect(names.count >= 8)
        #expect(names.subtracting(Self.known).isEmpty, "unknown to the daemon: \(names.subtracting(Self.known))")
    }

    @Test("the Swift client's names are the daemon's")
    func swift() throws {
        var names = Set<String>()
        for file in ["ControlAttribute.swift", "ScopeFS+Bookmarks.swift"] {
            names.formUnion(try Self.names(in: "clients/swift/Sources/ScopeFSClient/" + file))
        }
        names.formUnion(
            try Self.names(
                in: "clients/swift/Sources/ScopeFSClient/ScopeFS+References.swift",
                shortNames: #"\bread\("([a-z-]+)"\)"#))
        #expect(names.count >= 10)
        #expect(names.subtracting(Self.known).isEmpty, "unknown to the daemon: \(names.subtracting(Self.known))")
    }
}
