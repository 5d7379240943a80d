import CommandErrors
import Documents
import Foundation
import Policy
import PolicyStore
import Testing

@Suite struct BookmarkCodecTests {
    let codec = BookmarkCodec(key: Data(repeating: 7, count: 32))
    let bookmark = Bookmark(
        app: "com.example.editor", provider: "local", item: "5d1e-42", access: .readWrite, path: "Novel/a.txt")

    @Test("SPEC S25: a bookmark decodes to what was encoded")
    func roundTrip() throws {
        #expect(try codec.decode(codec.encode(bookmark)) == bookmark)
    }

    @Test("SPEC S25: changing any single character of a token makes it invalid")
    func everyChangedCharacterIsRejected() {
        let token = Array(codec.encode(bookmark))
        for index in token.indices where token[index] != "." {
            var changed = token
            changed[index] = token[index] == "A" ? "B" : "A"
            #expect(throws: CommandError.self) { try codec.decode(String(changed)) }
        }
    }

    @Test("SPEC S25: a token made with another key, truncated, or not a token, is invalid")
    func foreignAndTruncatedTokensAreRejected() {
        let other = BookmarkCodec(key: Data(repeating: 8, count: 32)).encode(bookmark)
        #expect(throws: CommandError.self) { try codec.decode(other) }
        let token = codec.encode(bookmark)
        #expect(throws: CommandError.self) { try codec.decode(String(token.dropLast())) }
        #expect(throws: CommandError.self) { try codec.decode("") }
        #expect(throws: CommandError.self) { try codec.decode("not.a-bookmark") }
    }
}
