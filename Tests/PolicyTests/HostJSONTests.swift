import Foundation
import HostText
import Policy
import Testing

/// Paths on the control socket (SPEC S33a, issue 16): `\udcXX` both ways.
@Suite struct HostJSONTests {
    struct Message: Codable, Equatable { var path: String }

    func decode(_ text: String) throws -> String {
        try JSONDecoder().decode(Message.self, from: Data(HostJSON.decodable(Array(text.utf8)))).path
    }

    @Test("a lone \\udcXX is byte XX; an encoded path round-trips")
    func loneSurrogates() throws {
        let cafe = String(hostBytes: Array("caf".utf8) + [0xE9] + Array(".txt".utf8))
        #expect(try decode(#"{"path":"caf\udce9.txt"}"#).hostBytes == cafe.hostBytes)
        let encoded = HostJSON.escaped(try JSONEncoder().encode(Message(path: cafe)))
        #expect(String(decoding: encoded, as: UTF8.self) == #"{"path":"caf\udce9.txt"}"#)
        #expect(try decode(String(decoding: encoded, as: UTF8.self)).sameHostName(as: cafe))
    }

    @Test("raw bytes that are not UTF-8 are taken as bytes")
    func rawBytes() throws {
        let text = Array(#"{"path":"caf"#.utf8) + [0xE9] + Array(#".txt"}"#.utf8)
        let path = try JSONDecoder().decode(Message.self, from: Data(HostJSON.decodable(text))).path
        #expect(path.hostBytes == Array("caf".utf8) + [0xE9] + Array(".txt".utf8))
    }

    @Test("real characters stay characters: pairs, the escape range, escaped backslashes")
    func realCharacters() throws {
        // A surrogate pair (U+1F600) and an escaped backslash before "udce9".
        #expect(try decode(#"{"path":"\ud83d\ude00 \\udce9"}"#) == "\u{1F600} \\udce9")
        // A real U+10FFE9, as a pair or raw, is its own four bytes, not byte E9.
        let real = Array("\u{10FFE9}".utf8)
        #expect(try decode(#"{"path":"\udbff\udfe9"}"#).hostBytes == real)
        #expect(try decode(#"{"path":"\#u{10FFE9}"}"#).hostBytes == real)
        // Outside strings nothing changes.
        #expect(HostJSON.decodable(Array(#"{"a":[1,2]}"#.utf8)) == Array(#"{"a":[1,2]}"#.utf8))
    }
}
