import Foundation
import ProviderExtensions
import Testing

/// What one call costs: `item` on the folder example, one caller at a
/// time, with and without the sandbox (figures for docs/PERFORMANCE.md;
/// the bound only catches a host that waits where it should not).
@Suite(.serialized) struct RoundTripTests {
    func measure(sandbox: Bool) throws -> Double {
        let fixture = try Fixture()
        let root = try fixture.makeFolder("root")
        try fixture.write("root/file", "x")
        let host = fixture.folderHost(
            root: root, sandbox: ExtensionSandbox(enabled: sandbox, writablePaths: sandbox ? [root] : []))
        #expect(host.waitUntilRunning(timeout: 20))
        let id = try #require(try host.list("root", page: nil, RequestControl()).items.first?.id)
        for _ in 0..<200 { _ = try host.item(id, RequestControl()) }
        let calls = 2000
        let took = try seconds { for _ in 0..<calls { _ = try host.item(id, RequestControl()) } }
        return took / Double(calls) * 1e6
    }

    @Test("an item call's round trip, in µs")
    func itemRoundTrip() throws {
        let direct = try measure(sandbox: false)
        let sandboxed = try measure(sandbox: true)
        print("item round trip: \(Int(direct)) µs direct, \(Int(sandboxed)) µs in the sandbox")
        #expect(direct < 5000 && sandboxed < 5000)
    }
}
