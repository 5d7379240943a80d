import Testing

@testable import ScopeFSCLI

@Suite struct PickerModelTests {
    @Test("SPEC S21: folders before files, each sorted without regard to case, ties by exact name")
    func order() {
        let entries = [
            PickerEntry(name: "b.txt", kind: .file), PickerEntry(name: "Zeta", kind: .folder),
            PickerEntry(name: "A.txt", kind: .file), PickerEntry(name: "alpha", kind: .folder),
            PickerEntry(name: "a.txt", kind: .file),
        ]
        #expect(PickerListing.sorted(entries).map(\.name) == ["alpha", "Zeta", "A.txt", "a.txt", "b.txt"])
    }

    @Test("SPEC S21: hidden files are dot-files")
    func hidden() {
        #expect(PickerListing.isHidden(".git"))
        #expect(!PickerListing.isHidden("notes.txt"))
    }

    @Test("SPEC S21: sizes for people, in units of 1024, rounded before the unit is chosen")
    func sizes() {
        #expect(PickerListing.formatSize(0) == "0 B")
        #expect(PickerListing.formatSize(1023) == "1023 B")
        #expect(PickerListing.formatSize(4096) == "4.0 KB")
        #expect(PickerListing.formatSize(1024 * 1024 - 40) == "1.0 MB")
        #expect(PickerListing.formatSize(3 << 30) == "3.0 GB")
    }

    @Test("Wide characters take two columns, combining marks none; truncation ends with an ellipsis")
    func columns() {
        #expect(TerminalText.width(of: "日本") == 4)
        #expect(TerminalText.width(of: "e\u{301}") == 1)
        #expect(TerminalText.truncate("report-final.txt", to: 8) == "report-…")
        #expect(TerminalText.fit("日本語", to: 5) == "日本…")
        #expect(TerminalText.fit("a", to: 3) == "a  ")
    }

    @Test("Going up from a provider's folder ends at the list of providers, highlighting where we were")
    func places() {
        let place = PickerPlace.provider("local", "Novel/Drafts")
        #expect(place.parent == .provider("local", "Novel"))
        #expect(place.name == "Drafts")
        #expect(PickerPlace.provider("local", "").parent == .providers)
        #expect(PickerPlace.providers.child(PickerEntry(name: "local", kind: .provider)) == .provider("local", ""))
        #expect(place.child(PickerEntry(name: "x.txt", kind: .file)) == nil)
    }
}
