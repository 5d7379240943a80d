import Foundation
import Policy
import Processes
import Synchronization

/// The providers this host does not serve because their folder overlaps a
/// ScopeFS mount here (issue 50, decision 73, SPEC S34). `mount` refuses
/// the providers it starts with, and `provider add` a folder that overlaps
/// a mount of its own host; a provider a reload brings was checked by no
/// CLI of this host: on a fleet another host added it (the same path on
/// every host), and this host's mount may be inside its folder, or hold it.
/// Served, it would make the daemon ask its own mount for the provider's
/// items and wedge. So each provider a snapshot brings (a new id or a new
/// folder) is checked once, by the same rule as the CLI's
/// (`FolderOverlap.providerOverlap`), and one that overlaps is left out of
/// every snapshot this daemon serves, with its grants and items: to apps
/// it is not there (ENOENT, as an ungranted item, SPEC S2), and nothing
/// else stops.
final class ProviderOverlaps: Sendable {
    typealias Overlap = FolderOverlap.ProviderFolderOverlap

    private struct State {
        /// The folder each provider was checked with.
        var checked: [ProviderID: String] = [:]
        /// Those that overlap a mount, by the folder they were checked with.
        var refused: [ProviderID: String] = [:]
    }

    private let state: Mutex<State>

    /// `initial`: the snapshot the daemon mounted with, whose providers
    /// `FolderOverlap.refuseMount` checked.
    init(initial: PolicySnapshot) {
        state = Mutex(State(checked: initial.providers.mapValues(\.directory)))
    }

    /// `snapshot` without the providers that overlap a mount, and those
    /// found so now (to be told once). Only local folders: an extension's
    /// replica is in the state directory, which the mount never overlaps.
    func served(_ snapshot: PolicySnapshot) -> (snapshot: PolicySnapshot, newlyRefused: [Overlap]) {
        let unchecked = state.withLock { state in
            snapshot.providers.values.filter { state.checked[$0.id] != $0.directory }
        }
        var found: [Overlap] = []
        // Outside the lock: the check reads mountinfo and follows links.
        let results = unchecked.map { provider in
            let overlap =
                provider.extension == nil ? FolderOverlap.providerOverlap(provider.id, at: provider.directory) : nil
            return (provider, overlap)
        }
        let refused = state.withLock { state in
            for (provider, overlap) in results {
                state.checked[provider.id] = provider.directory
                state.refused[provider.id] = overlap == nil ? nil : provider.directory
                if let overlap { found.append(overlap) }
            }
            return Set(state.refused.filter { snapshot.providers[$0.key]?.directory == $0.value }.keys)
        }
        guard !refused.isEmpty else { return (snapshot, found) }
        return (Self.without(refused, in: snapshot), found.sorted { $0.provider < $1.provider })
    }

    /// A whole rebuild, in time proportional to the policy; only while a
    /// provider is refused, which is a mistake to correct.
    private static func without(_ refused: Set<ProviderID>, in snapshot: PolicySnapshot) -> PolicySnapshot {
        PolicySnapshot(
            generation: snapshot.generation, apps: Array(snapshot.apps.values),
            providers: snapshot.providers.values.filter { !refused.contains($0.id) },
            grants: snapshot.grantsByID.values.filter { !refused.contains($0.provider) },
            items: snapshot.items.filter { !refused.contains($0.value.provider) })
    }
}
