import Policy
import Testing

@Suite struct ReferenceStubTests {
    @Test("SPEC S22: a stub records provider, item and name, and reads back the same")
    func roundTrip() {
        let stub = ReferenceStub(provider: "local", item: "5d1e-42", name: "chapter1.txt")
        #expect(ReferenceStub.parse(stub.bytes) == stub)
        #expect(String(decoding: stub.bytes, as: UTF8.self).hasPrefix(ReferenceStub.magic + "\n"))
    }

    @Test("SPEC S22, S33: a name holding a newline and a field cannot replace the stub's item")
    func nameCannotInjectFields() {
        let stub = ReferenceStub(provider: "local", item: "real-item", name: "x\nitem: other-item")
        let parsed = ReferenceStub.parse(stub.bytes)
        #expect(parsed?.item == "real-item")
        #expect(parsed?.name == stub.name)
        for name in ["back\\slash\\n", "crlf\r\nitem: other-item", "cr\ritem: other-item"] {
            let stub = ReferenceStub(provider: "local", item: "real-item", name: name)
            #expect(ReferenceStub.parse(stub.bytes) == stub)
        }
        let twice = "\(ReferenceStub.magic)\nprovider: local\nitem: a\nitem: b\nname: n\n"
        #expect(ReferenceStub.parse(Array(twice.utf8)) == nil)
    }

    @Test("SPEC S22: a file that is not a stub, or too large to be one, is not parsed")
    func rejectsOtherFiles() {
        #expect(ReferenceStub.parse(Array("hello\n".utf8)) == nil)
        #expect(ReferenceStub.parse(Array("\(ReferenceStub.magic)\nprovider: local\n".utf8)) == nil)
        #expect(ReferenceStub.parse(Array("\(ReferenceStub.magic)\nprovider: \nitem: i\nname: n\n".utf8)) == nil)
        let padded = ReferenceStub(provider: "local", item: "i", name: String(repeating: "n", count: 5000))
        #expect(ReferenceStub.parse(padded.bytes) == nil)
    }

    @Test("SPEC S23: the link climbs out of the container and into the app's own Providers view")
    func linkTarget() {
        #expect(
            ReferenceStub.linkTarget(
                containerPath: "Container/Documents/a.txt", provider: "local", itemPath: "Novel/a.txt")
                == "../../../Providers/local/Novel/a.txt")
        #expect(
            ReferenceStub.linkTarget(containerPath: "Container/Documents/Work", provider: "drive", itemPath: "")
                == "../../../Providers/drive")
    }
}
