import Foundation
import Glibc
import Policy
import Testing

@testable import ScopeFSCLI

@Suite struct JSONOutputTests {
    @Test("issue 19: times as ISO 8601 UTC with milliseconds and Z")
    func times() {
        #expect(JSONOutput.timeText(Date(timeIntervalSince1970: 1_795_000_000.25)) == "2026-11-18T11:06:40.250Z")
    }

    @Test("issue 19: an event's keys sorted and camelCase, its times ISO 8601, slashes not escaped")
    func event() {
        let event = Event(
            time: 1_795_000_000.5, kind: .denial, app: "com.example.editor", pid: 42,
            path: "/com.example.editor/Providers/a",
            operation: "open", errno: EPERM, occurrences: 2, lastTime: 1_795_000_001)
        let text = JSONOutput.text(EventJSON(event, appName: "Editor"), .line)
        #expect(
            text
                == #"{"app":"com.example.editor","appName":"Editor","errno":1,"errnoName":"EPERM","kind":"denial","#
                + #""lastTime":"2026-11-18T11:06:41.000Z","occurrences":2,"operation":"open","#
                + #""path":"/com.example.editor/Providers/a","pid":42,"time":"2026-11-18T11:06:40.500Z"}"#)
    }

    @Test("issue 19: display names only where they say more than the id")
    func names() {
        let names = AppNames([
            App(id: "com.example.editor", name: "Editor"), App(id: "com.example.plain", name: "com.example.plain"),
        ])
        #expect(names.label("com.example.editor") == "com.example.editor (Editor)")
        #expect(names.label("com.example.plain") == "com.example.plain")
        #expect(names.name("com.example.unknown") == nil)
    }
}
