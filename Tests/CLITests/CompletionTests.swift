import Foundation
import Policy
import Testing

@testable import ScopeFSCLI

/// Completion of `PROVIDER:RELPATH` words and the bash script's wrapper
/// (issue 31), on a folder made here (no mount, no shell).
@Suite final class CompletionTests {
    let root: String
    let providers: [Provider]

    init() throws {
        root = FileManager.default.temporaryDirectory.path + "/scopefs-completion-\(UUID().uuidString)"
        for folder in ["Novel/drafts", "Notes"] {
            try FileManager.default.createDirectory(atPath: root + "/" + folder, withIntermediateDirectories: true)
        }
        for file in ["Novel/chapter1.txt", "Nova.txt", ".hidden"] {
            FileManager.default.createFile(atPath: root + "/" + file, contents: Data())
        }
        providers = [Provider(id: "local", name: "Local", directory: root)]
    }

    deinit {
        try? FileManager.default.removeItem(atPath: root)
    }

    func candidates(_ word: String) -> [String] {
        ItemPathCompletion.candidates(for: word, providers: providers)
    }

    @Test("issue 31: before the colon the provider ids, after it the names in its folder, folders with a slash")
    func names() {
        #expect(candidates("lo") == ["local:"])
        #expect(candidates("local:No") == ["local:Notes/", "local:Nova.txt", "local:Novel/"])
        #expect(candidates("local:Novel/") == ["local:Novel/chapter1.txt", "local:Novel/drafts/"])
        #expect(candidates("local:") == ["local:Notes/", "local:Nova.txt", "local:Novel/"])
        #expect(candidates("local:.h") == ["local:.hidden"])
    }

    @Test("issue 31: a path out of the provider, an unknown provider or a missing folder offers nothing")
    func outside() {
        #expect(candidates("local:../").isEmpty)
        #expect(candidates("local:Novel/../../").isEmpty)
        #expect(candidates("local:/etc/").isEmpty)
        #expect(candidates("drive:").isEmpty)
        #expect(candidates("local:Missing/").isEmpty)
    }

    @Test("issue 31: the bash script's complete line names the wrapper, which calls the parser's function")
    func bashWrapper() {
        let generated = "_scopefs() {\n    :\n}\n\ncomplete -o filenames -F _scopefs scopefs\n"
        let script = CompletionScripts.bash(generated)
        #expect(script.hasSuffix("complete -o filenames -F _scopefs_with_colons scopefs\n"))
        #expect(!script.contains("-F _scopefs scopefs"))
        #expect(script.contains("_scopefs \"${1}\" \"${whole_word}\""))
        #expect(
            CompletionScripts.replacement(for: ["--generate-completion-script", "zsh"], environment: [:]) == nil)
        #expect(CompletionScripts.replacement(for: ["grant"], environment: [:]) == nil)
    }
}
