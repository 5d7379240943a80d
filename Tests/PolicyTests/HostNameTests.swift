import HostText
import Policy
import Testing

/// Names are bytes (SPEC S33a): the lossless `String` form of `HostName`,
/// byte-wise comparison, and how such names are printed.
@Suite struct HostNameTests {
    func roundTrip(_ bytes: [UInt8]) -> [UInt8] {
        String(hostBytes: bytes).hostBytes
    }

    @Test func validUTF8IsKeptAsItIs() {
        let name = "café 日本 \u{1F600}.txt"
        #expect(String(hostBytes: Array(name.utf8)) == name)
        #expect(!String(hostBytes: Array(name.utf8)).hasEscapedBytes)
    }

    @Test func bytesThatAreNotUTF8RoundTrip() {
        let cases: [[UInt8]] = [
            Array("caf".utf8) + [0xE9] + Array(".txt".utf8),
            [0xFF], [0xC0, 0x80], [0xED, 0xA0, 0x80],  // overlong NUL, a surrogate
            [0xE2, 0x82], [0xF4, 0x90, 0x80, 0x80],  // cut sequence, above U+10FFFF
            [0xF4, 0x8F, 0xBE, 0x80], [0xF4, 0x8F, 0xBF, 0xBF, 0xFF],  // a real escape-range character
            [0xF4, 0x8F, 0xBE], [0xCC, 0x81, 0xFF],
        ]
        for bytes in cases {
            #expect(roundTrip(bytes) == bytes, "\(bytes)")
        }
    }

    @Test func randomBytesRoundTrip() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2000 {
            let bytes = (0..<Int.random(in: 1...24, using: &generator)).map { _ in
                UInt8.random(in: 1...255, using: &generator)
            }
            #expect(roundTrip(bytes) == bytes, "\(bytes)")
        }
    }

    @Test func distinctBytesGiveDistinctNames() {
        // A stray byte and the real character its escape is made of differ.
        let stray = String(hostBytes: [0x80])
        let real = String(hostBytes: [0xF4, 0x8F, 0xBE, 0x80])
        #expect(!stray.sameHostName(as: real))
        #expect(real.hostBytes == [0xF4, 0x8F, 0xBE, 0x80])
    }

    @Test func withHostCStringPassesTheBytes() {
        let bytes: [UInt8] = [0x6E, 0xFF, 0x2E]
        let passed = String(hostBytes: bytes).withHostCString { pointer in
            (0..<3).map { UInt8(bitPattern: pointer[$0]) } + [UInt8(bitPattern: pointer[3])]
        }
        #expect(passed == bytes + [0])
    }

    @Test func canonicallyEquivalentNamesAreTwoKeys() {
        let composed = "caf\u{E9}"
        let decomposed = "cafe\u{301}"
        #expect(composed == decomposed)  // Swift's String equality
        #expect(!composed.sameHostName(as: decomposed))
        #expect(Set([HostNameKey(composed), HostNameKey(decomposed)]).count == 2)
        #expect(HostNameKey(composed) == HostNameKey(String("xcaf\u{E9}".dropFirst())))
    }

    @Test func pathsAreSplitByBytes() {
        // As Characters, "/" followed by a combining mark is no "/".
        #expect(RelativePath.components(of: "a/\u{301}b") == ["a", "\u{301}b"])
        #expect(RelativePath.lastComponent(of: "a/\u{301}b").sameHostName(as: "\u{301}b"))
        #expect(RelativePath.parent(of: "a/\u{301}b") == "a")
        #expect(RelativePath.normalize("x/./\u{301}/../y") == nil)
        #expect(!RelativePath.isWithin("cafe\u{301}/x", "caf\u{E9}"))
        #expect(RelativePath.isWithin("caf\u{E9}/x", "caf\u{E9}"))
        #expect(!RelativePath.isWithin("caf\u{E9}x", "caf\u{E9}"))
    }

    @Test func textShowsStrayBytesEscapedAndJSONAsSurrogates() {
        let name = String(hostBytes: Array("caf".utf8) + [0xE9] + Array(".txt".utf8))
        #expect(name.escapedForTerminal == "caf\\xe9.txt")
        #expect("\"\(name)\"".jsonHostEscaped == "\"caf\\udce9.txt\"")
        #expect("\"plain\"".jsonHostEscaped == "\"plain\"")
    }
}
