import HostText
import Policy

/// `scopefs pick --multiple` (issue 17, like `allowsMultipleSelection`):
/// Space, s or . toggle an item into the selection, which survives
/// browsing other folders; Enter on a file or on an empty list, or c,
/// confirms everything selected (Enter on a folder still opens it).
/// With export and move the toggled items are the container's, and
/// confirming leads to the choice of one destination folder for them all
/// (`UIDocumentPickerViewController(forExporting:)` takes several URLs).
extension PickerController {
    /// Handles the keys that differ with several items; false for the rest.
    mutating func handleMultiple(_ key: Key) -> Bool {
        switch key {
        case .space, .character("s"):
            if let entry = highlighted { toggle(entry) } else { toggleCurrentFolder() }
        case .character("."): toggleCurrentFolder()
        case .character("c"): confirmSelected()
        case .enter:
            if let entry = highlighted, entry.isFolder { return false }  // opens it
            // Nothing toggled yet: Enter on a file chooses that one file.
            if selected.isEmpty, let entry = highlighted { toggle(entry) }
            confirmSelected()
        default: return false
        }
        return true
    }

    /// Whether the row `entry` of the folder shown is selected.
    func isSelected(_ entry: PickerEntry) -> Bool {
        if case .container(let path) = place {
            let item = RelativePath.join(path, entry.name)
            return selectedContainerItems.contains { $0.sameHostName(as: item) }
        }
        guard let candidate = selection(for: entry) else { return false }
        return selected.contains { $0.provider == candidate.provider && $0.path.sameHostName(as: candidate.path) }
    }

    private func selection(for entry: PickerEntry) -> PickerSelection? {
        switch place {
        case .providers: return PickerSelection(provider: entry.name, path: "", isFolder: true)
        case .provider(let provider, let path):
            return PickerSelection(
                provider: provider, path: RelativePath.join(path, entry.name), isFolder: entry.isFolder)
        case .container: return nil
        }
    }

    private mutating func toggle(_ entry: PickerEntry) {
        if case .container(let path) = place {
            return toggleContainerItem(RelativePath.join(path, entry.name))
        }
        guard !entry.dimmed else {
            setMessage("\(entry.name) is not of a type asked for (\(typesAskedFor.joined(separator: ", "))).")
            return
        }
        guard let candidate = selection(for: entry) else { return }
        toggle(candidate)
    }

    private mutating func toggleCurrentFolder() {
        if case .container(let path) = place {
            guard !path.isEmpty else { return setMessage("Choose an item of the container.") }
            return toggleContainerItem(path)
        }
        guard case .provider(let provider, let path) = place else {
            setMessage("Choose a provider, or open one.")
            return
        }
        toggle(PickerSelection(provider: provider, path: path, isFolder: true))
    }

    private mutating func toggle(_ candidate: PickerSelection) {
        if mode == .import && candidate.isFolder {
            setMessage("Import copies files: choose files.")
            return
        }
        if let index = selected.firstIndex(where: {
            $0.provider == candidate.provider && $0.path.sameHostName(as: candidate.path)
        }) {
            selected.remove(at: index)
        } else {
            selected.append(candidate)
        }
        setMessage(selected.isEmpty ? "Nothing selected." : "\(selected.count) selected: Enter or c confirms.")
    }

    private mutating func toggleContainerItem(_ item: String) {
        if let index = selectedContainerItems.firstIndex(where: { $0.sameHostName(as: item) }) {
            selectedContainerItems.remove(at: index)
        } else {
            selectedContainerItems.append(item)
        }
        setMessage(
            selectedContainerItems.isEmpty
                ? "Nothing selected." : "\(selectedContainerItems.count) selected: Enter or c confirms.")
    }

    private mutating func confirmSelected() {
        if mode.startsInContainer {
            guard !selectedContainerItems.isEmpty else {
                return setMessage("Nothing selected: Space toggles an item.")
            }
            let items = selectedContainerItems
            selectedContainerItems = []
            return chooseDestination(for: items)
        }
        guard !selected.isEmpty else {
            setMessage("Nothing selected: Space toggles an item.")
            return
        }
        let verb = mode == .import ? "Import" : "Open"
        let access = mode == .open && readOnly ? " read-only" : ""
        let names = selected.map { Self.displayName($0.provider, $0.path) }.joined(separator: ", ")
        let what = selected.count == 1 ? names : "\(selected.count) items (\(names))"
        ask("\(verb) \(what)\(access) for \(app)? [y/N]", selected)
    }
}
