import Foundation
import HostText
import Testing

@testable import ScopeFSClient

/// Paths on the control socket (SPEC S33a, issue 16): the daemon writes a
/// byte that is not UTF-8 as `\udcXX`, which `JSONDecoder` refuses.
@Suite struct HostPathTests {
    struct Answer: Codable { var path: String }

    @Test("\\udcXX decodes to a URL whose host bytes are the file's")
    func answerToBytes() throws {
        let line = Data(#"{"path":"/m/caf\udce9.txt"}"#.utf8)
        let answer = try JSONDecoder().decode(Answer.self, from: HostPathText.decodable(line))
        let url = URL(fileURLWithPath: answer.path)
        #expect(url.hostPathBytes == Array("/m/caf".utf8) + [0xE9] + Array(".txt".utf8))
        #expect(url.withHostPath { strlen($0) } == 11)
    }

    @Test("a request writes the byte back as \\udcXX; pairs and other escapes stay")
    func requestRoundTrip() throws {
        let request = try JSONEncoder().encode(Answer(path: "/m/caf\u{10FFE9}.txt"))
        #expect(String(decoding: HostPathText.escaped(request), as: UTF8.self) == #"{"path":"\/m\/caf\udce9.txt"}"#)
        let kept = Data(#"{"path":"\ud83d\ude00\\udce9\n"}"#.utf8)
        #expect(HostPathText.decodable(kept) == kept)
    }
}
