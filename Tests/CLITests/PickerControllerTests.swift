import Policy
import Testing

@testable import ScopeFSCLI

/// The picker's key handling on an in-memory tree (no terminal, no mount).
@Suite struct PickerControllerTests {
    /// The container holds a.txt, b.txt and c.txt; provider "local" holds
    /// the folder Out.
    private static func lister(_ place: PickerPlace) -> [PickerEntry] {
        switch place {
        case .providers: return [PickerEntry(name: "local", kind: .provider)]
        case .provider(_, let path):
            return path.isEmpty ? [PickerEntry(name: "Out", kind: .folder)] : []
        case .container(let path):
            return path.isEmpty ? ["a.txt", "b.txt", "c.txt"].map { PickerEntry(name: $0, kind: .file) } : []
        }
    }

    private static func press(_ picker: inout PickerController, _ keys: [Key]) -> PickerController.Outcome {
        var outcome = PickerController.Outcome.proceed
        for key in keys { outcome = picker.handle(key) }
        return outcome
    }

    @Test("issue 17: export --multiple toggles container items, then places them all in one chosen folder")
    func exportSeveral() {
        var picker = PickerController(
            mode: .export, app: "com.example.app", readOnly: false, allowsMultiple: true,
            list: { place in Self.lister(place) })
        // a.txt and c.txt toggled, b.txt skipped; c confirms.
        _ = Self.press(&picker, [.space, .down, .down, .space])
        #expect(picker.selectedContainerItems == ["a.txt", "c.txt"])
        _ = Self.press(&picker, [.character("c")])
        #expect(picker.stage == .destination)
        #expect(picker.place == .providers)
        // Into local, highlight Out, choose the folder shown with ".".
        _ = Self.press(&picker, [.enter, .enter])
        #expect(picker.place == .provider("local", "Out"))
        _ = Self.press(&picker, [.character(".")])
        #expect(picker.confirmation?.question == "Export 2 items (a.txt, c.txt) to local:Out? [y/N]")
        let outcome = Self.press(&picker, [.character("y")])
        #expect(
            outcome
                == .done([
                    PickerSelection(provider: "local", path: "Out", isFolder: true, containerPath: "a.txt"),
                    PickerSelection(provider: "local", path: "Out", isFolder: true, containerPath: "c.txt"),
                ]))
    }

    @Test("issue 31: for an app's export request the picker asks only where, and never for other items")
    func destinationOfAppNamedItems() {
        var picker = PickerController(
            mode: .export, app: "com.example.app", readOnly: false, list: { place in Self.lister(place) })
        picker.chooseDestination(for: ["Documents/b.txt"], fixed: true)
        #expect(picker.stage == .destination)
        #expect(picker.title == "Export b.txt: choose a destination folder")
        // Left at the list of providers stays there: the app named its item.
        _ = Self.press(&picker, [.left])
        #expect(picker.stage == .destination && picker.place == .providers)
        _ = Self.press(&picker, [.enter, .enter, .character(".")])
        #expect(picker.confirmation?.question == "Export b.txt to local:Out? [y/N]")
        #expect(
            Self.press(&picker, [.character("y")])
                == .done([
                    PickerSelection(provider: "local", path: "Out", isFolder: true, containerPath: "Documents/b.txt")
                ]))
    }

    @Test("issue 17: going back from the destination keeps the container items selected")
    func backKeepsSelection() {
        var picker = PickerController(
            mode: .move, app: "com.example.app", readOnly: false, allowsMultiple: true,
            list: { place in Self.lister(place) })
        _ = Self.press(&picker, [.space, .down, .space, .character("c")])
        #expect(picker.stage == .destination)
        _ = Self.press(&picker, [.left])
        #expect(picker.stage == .source)
        #expect(picker.selectedContainerItems == ["a.txt", "b.txt"])
        #expect(picker.isSelected(PickerEntry(name: "b.txt", kind: .file)))
        #expect(!picker.isSelected(PickerEntry(name: "c.txt", kind: .file)))
    }

    @Test("issue 17: without --multiple, export places the one item chosen")
    func exportOne() {
        var picker = PickerController(
            mode: .export, app: "com.example.app", readOnly: false, list: { place in Self.lister(place) })
        _ = Self.press(&picker, [.down, .enter])
        #expect(picker.stage == .destination)
        _ = Self.press(&picker, [.enter, .enter, .character("."), .character("y")])
        #expect(picker.confirmation == nil)
        #expect(picker.containerChoices == ["b.txt"])
    }
}
