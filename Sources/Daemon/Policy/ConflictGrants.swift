import CommandErrors
import Foundation
import Logging
import Policy
import PolicyStore

/// A conflict copy that an app holding only the file can see (issue 47,
/// SPEC S43): Apple's NSFileVersion keeps an unresolved conflict's versions
/// with the file, reachable by whoever may open it
/// (`unresolvedConflictVersionsOfItem(at:)`). Here the local edit is a new
/// item beside the file, which a folder grant covers but a file grant does
/// not: without more, an app's own edit left its view with no errno and no
/// event. Each app whose active file grant is the original gets the copy
/// granted too, with the same access, and a `conflict` event of its own
/// naming it; its presenters hear the copy appear.
struct ConflictGrants: Sendable {
    let repository: PolicyRepository
    let reloader: PolicyReloader
    let events: any EventSink
    let logger: Logger

    /// The extension's replica kept the local edit of `original` as `copy`
    /// (paths in the provider). On the replica's sync thread.
    func share(provider: ProviderID, original: String, copy: String, in snapshot: PolicySnapshot) {
        let holders = snapshot.grantsByID.values.filter {
            $0.provider == provider && $0.state == .active && !$0.isDirectory && $0.relativePath == original
        }
        guard !holders.isEmpty else { return }
        for grant in holders {
            do throws(CommandError) {
                _ = try repository.grant(
                    app: grant.app, provider: provider, path: copy, access: grant.access, wholeProvider: false)
                events.record(
                    Event(
                        time: Date().timeIntervalSince1970, kind: .conflict, app: grant.app,
                        path: MountLayout.providerPath(app: grant.app, provider: provider, path: copy),
                        operation: "conflict: the local edit of \(original) is kept beside it"))
            } catch {
                logger.error("\(grant.app): cannot grant the conflict copy \(provider)/\(copy): \(error.message)")
            }
        }
        do throws(CommandError) { try reloader.reload() } catch {
            logger.error(
                "the conflict copy \(provider)/\(copy) is granted; the policy did not reload: \(error.message)")
        }
    }
}
