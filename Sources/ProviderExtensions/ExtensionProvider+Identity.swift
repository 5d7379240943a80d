import Foundation

/// What the extension's answers say of an item's identity that cannot be
/// so, made visible (issue 47, docs/PROVIDERS.md "Identity"): one id for
/// two items, and an item `fetch` says does not exist.
extension ExtensionProvider {
    /// One item per id. A listing may give an item twice while a folder
    /// changes under its pages (the same place: nothing to tell); one id at
    /// two places is the extension's bug: the first is kept and each other
    /// is reported (an `extension` event), never dropped in silence.
    func distinctItems(_ items: [ExtensionItem], _ method: String) -> [ExtensionItem] {
        var places: [String: ExtensionItem] = [:]
        var kept: [ExtensionItem] = []
        for item in items {
            guard let first = places[item.id] else {
                places[item.id] = item
                kept.append(item)
                continue
            }
            if !item.isSameByBytes(as: first) { reportDuplicate(item, of: first, method) }
        }
        return kept
    }

    func reportDuplicate(_ item: ExtensionItem, of first: ExtensionItem, _ method: String) {
        let (firstPath, otherPath) = lock.withLock {
            (
                first.parent.flatMap { index.path(parent: $0, name: first.name) } ?? first.name,
                item.parent.flatMap { index.path(parent: $0, name: item.name) } ?? item.name
            )
        }
        guard item.id.utf8.elementsEqual(first.id.utf8) else {
            // Swift compares Strings by canonical equivalence: `café` in NFC
            // and in NFD are one key of the replica's maps (issue 50). The
            // wire keeps ids as ASCII (`ReplicaID`), so only an
            // `ExtensionCalls` that is not the wire (a test's remote) gets here.
            report(
                .error, otherPath,
                "\(method): ids \(first.id) and \(item.id) differ only by Unicode normalisation, which "
                    + "the replica does not tell apart: \(otherPath) is not shown")
            return
        }
        report(
            .error, otherPath,
            "\(method): the extension gave id \(item.id) to two items, \(firstPath) and \(otherPath): "
                + "\(otherPath) is not shown")
    }

    /// A download's `noSuchItem`: the store no longer has the item although
    /// the replica lists it. The sync thread asks the extension for it and
    /// removes it when `item` agrees (`confirmVanished`), so an app does not
    /// keep seeing a file it can never read.
    func itemVanished(_ id: String) {
        _ = lock.withLock { vanished.insert(id) }
        wake(pull: true)
    }

    /// On the sync thread, after a pull: each item a fetch found gone that
    /// `item` finds gone too leaves the replica, with an event.
    func confirmVanished() {
        let ids = lock.withLock {
            defer { vanished = [] }
            return vanished
        }
        for id in ids.sorted() {
            do {
                _ = try calls.item(id, RequestControl())
            } catch  where error.code == .noSuchItem {
                let path = lock.withLock { index.path(of: id) }
                removeRemotely(deleted: id)
                report(.error, path, "fetch and item: the store has no item \(path ?? id) any more: removed")
            } catch {
                // Not known either way (offline): the next download tells again.
            }
        }
    }
}

extension ExtensionItem {
    /// The same id, parent and name, byte for byte (names are bytes, SPEC
    /// S33a; String's == would take NFC and NFD spellings for one).
    func isSameByBytes(as other: ExtensionItem) -> Bool {
        id.utf8.elementsEqual(other.id.utf8) && name.utf8.elementsEqual(other.name.utf8)
            && (parent ?? "").utf8.elementsEqual((other.parent ?? "").utf8) && (parent == nil) == (other.parent == nil)
    }
}
