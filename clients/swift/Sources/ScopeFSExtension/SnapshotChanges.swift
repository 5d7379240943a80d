import Foundation

/// Changes by comparing snapshots, for a store that cannot tell its changes.
/// `snapshot` (the extension's) returns every item of the tree by id. Each
/// anchor names a snapshot kept in memory (the last `keep`); `changes`
/// takes another and compares. An older anchor, or one from before a
/// restart, is expired: the daemon lists again.
public final class SnapshotChanges: @unchecked Sendable {
    private let snapshot: @Sendable () async throws -> [ItemIdentifier: Item]
    private let keep: Int
    private let lock = NSLock()
    private var snapshots: [String: [ItemIdentifier: Item]] = [:]
    private var order: [String] = []
    private var counter = 0
    private let epoch =
        "\(String(getpid(), radix: 16)).\(String(UInt64(Date().timeIntervalSince1970 * 1e9), radix: 16))"

    public init(keep: Int = 16, snapshot: @escaping @Sendable () async throws -> [ItemIdentifier: Item]) {
        self.snapshot = snapshot
        self.keep = keep
    }

    private func remember(_ tree: [ItemIdentifier: Item]) -> String {
        lock.withLock {
            counter += 1
            let anchor = "\(epoch).\(counter)"
            snapshots[anchor] = tree
            order.append(anchor)
            while order.count > keep { snapshots.removeValue(forKey: order.removeFirst()) }
            return anchor
        }
    }

    public func currentAnchor() async throws -> String {
        remember(try await snapshot())
    }

    public func changes(since anchor: String) async throws -> ItemChanges {
        guard let before = lock.withLock({ snapshots[anchor] }) else {
            throw ExtensionError(.syncAnchorExpired, "anchor '\(anchor)' is unknown or too old; list again")
        }
        let after = try await snapshot()
        let updated = after.values.filter { before[$0.identifier] != $0 }
        let deleted = before.keys.filter { after[$0] == nil }
        return ItemChanges(updated: updated, deleted: deleted, anchor: remember(after))
    }
}
