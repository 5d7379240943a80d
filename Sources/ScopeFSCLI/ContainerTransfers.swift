import CommandErrors
import Control
import Documents
import Policy
import PolicyStore

/// Export and move of several container items into one provider folder
/// (issue 17; Apple's `UIDocumentPickerViewController(forExporting:
/// [URL], asCopy:)`), as `scopefs export`/`move` and the agent answering
/// an app's pick request perform them (SPEC S19, S20, S34).
///
/// All items are checked first (each exists, no two share a name, no name
/// is taken in the folder unless `replace`): those failures place nothing.
/// Then the items go one by one in the order given, each coordinated like
/// a single transfer. If one still fails (a claim refused, an I/O error),
/// the ones before it stay placed (a moved item keeps its grant and
/// reference), the failing one is not half-moved (the copy is atomic and
/// the original is removed only after it), and the ones after it are not
/// tried: they stay in the container. The error names all three groups.
struct ContainerTransfers {
    enum Kind: String {
        case export, move
    }

    /// One item placed: where it was in the container, and its path in the
    /// provider; a move's grant and reference.
    struct Placed {
        var containerPath: String
        var path: String
        var opened: PickerActions.Opened?
    }

    let picker: PickerActions
    let app: AppID
    let provider: ProviderID
    let folder: String
    let replace: Bool
    let coordination: TransferCoordination
    /// A fresh copier per item (the command's draws a progress bar).
    var copier: (Bool) -> AtomicCopy = { AtomicCopy(replace: $0) }

    /// Places `containerPaths` in order; `placed` hears each as soon as it
    /// is in its folder (to announce it, print it) before the next starts.
    func run(
        _ kind: Kind, _ containerPaths: [String], placed: (Placed) throws(CommandError) -> Void
    ) throws(CommandError) {
        try picker.checkTransfer(
            app: app, containerPaths: containerPaths, provider: provider, folder: folder, replace: replace)
        var done: [Placed] = []
        for (index, containerPath) in containerPaths.enumerated() {
            let result: Placed
            do {
                result = try place(kind, containerPath)
            } catch {
                guard containerPaths.count > 1 else { throw error }
                throw CommandError(
                    error.kind,
                    Self.partialFailure(
                        kind, failed: index, of: containerPaths, done: done, provider: provider, reason: error.message))
            }
            done.append(result)
            try placed(result)
        }
    }

    private func place(_ kind: Kind, _ containerPath: String) throws(CommandError) -> Placed {
        let claimed = TransferCoordination.items(
            app: app, containerPath: containerPath, provider: provider, folder: folder)
        return try coordination.withClaims(claimed) { () throws(CommandError) in
            switch kind {
            case .export:
                let path = try picker.export(
                    app: app, containerPath: containerPath, provider: provider, folder: folder,
                    copy: copier(replace))
                return Placed(containerPath: containerPath, path: path, opened: nil)
            case .move:
                let opened = try picker.move(
                    app: app, containerPath: containerPath, provider: provider, folder: folder,
                    copy: copier(replace))
                let name = RelativePath.lastComponent(of: containerPath)
                return Placed(
                    containerPath: containerPath, path: RelativePath.join(RelativePath.normalize(folder) ?? "", name),
                    opened: opened)
            }
        }
    }

    /// "item 2 of 3 (Documents/b.txt) was not moved: REASON; moved before
    /// it: ...; not tried, still in the container: ..."
    static func partialFailure(
        _ kind: Kind, failed index: Int, of containerPaths: [String], done: [Placed], provider: ProviderID,
        reason: String
    ) -> String {
        let verb = kind == .export ? "exported" : "moved"
        var text =
            "item \(index + 1) of \(containerPaths.count) (\(containerPaths[index])) was not \(verb): \(reason)"
        if !done.isEmpty {
            text +=
                "; \(verb) before it: "
                + done.map { "\($0.containerPath) -> \(provider):\($0.path)" }.joined(separator: ", ")
        }
        let rest = containerPaths.dropFirst(index + 1)
        if !rest.isEmpty {
            text += "; not tried, still in the container: " + rest.joined(separator: ", ")
        }
        return text
    }
}
