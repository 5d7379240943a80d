import Documents
import Testing

/// Against the system's shared-mime-info database (Debian's
/// shared-mime-info, installed by `make deps`).
@Suite struct ContentTypesTests {
    let types = ContentTypes()

    @Test("Issue 17: file names get their MIME type from the database's globs")
    func globs() {
        #expect(types.mimeType(ofName: "chapter1.txt") == "text/plain")
        #expect(types.mimeType(ofName: "REPORT.PDF") == "application/pdf")
        #expect(types.mimeType(ofName: "photo.png") == "image/png")
        #expect(types.mimeType(ofName: "no-extension") == "application/octet-stream")
    }

    @Test("Issue 17: sub-classes count: markdown is text, every text/* is plain text")
    func subclasses() {
        #expect(types.isA("text/markdown", "text/plain"))
        #expect(types.isA("text/x-python", "text/plain"))
        #expect(types.isA("image/png", "image/*"))
        #expect(!types.isA("application/pdf", "text/plain"))
    }

    @Test("Issue 17: UTType identifiers and MIME types both name what the app wants")
    func matching() {
        #expect(types.matches(name: "notes.md", isDirectory: false, types: ["public.plain-text"]))
        #expect(types.matches(name: "a.pdf", isDirectory: false, types: ["public.image", "com.adobe.pdf"]))
        #expect(!types.matches(name: "notes.md", isDirectory: false, types: ["public.image"]))
        #expect(types.matches(name: "photo.jpg", isDirectory: false, types: ["image/*"]))
        #expect(types.matches(name: "Novel", isDirectory: true, types: ["public.folder"]))
        #expect(!types.matches(name: "Novel", isDirectory: true, types: ["public.plain-text"]))
        #expect(types.matches(name: "anything.bin", isDirectory: false, types: []))
        #expect(!types.matches(name: "a.txt", isDirectory: false, types: ["com.example.unknown-type"]))
    }
}
