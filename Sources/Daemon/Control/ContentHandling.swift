import CommandErrors
import Control
import Glibc
import Policy
import ProviderExtensions

/// The owner's hand on an extension provider's content: `scopefs provider
/// sync`, `pin`, `unpin`, `evict` (SPEC S41, S42). Refusals carry the exit
/// code the CLI ends with (docs/CLI.md).
enum ContentHandling {
    static func handle(
        provider: ProviderID, action: ContentAction, path: String?, extensions: ExtensionProviders
    ) -> ControlResponse {
        guard let replica = extensions.replica(provider) else {
            return .failure(
                CommandError.Kind.unknown.rawValue, "provider \(provider) has no extension running in this daemon")
        }
        guard let item = RelativePath.normalize(path ?? "") else {
            return .failure(CommandError.Kind.usage.rawValue, "\(path ?? "") is not a path inside a provider")
        }
        do {
            switch action {
            case .sync:
                // A failed extension makes no round: say so now, not after
                // the sync's wait (issue 47).
                if let refusal = notRunning(provider, extensions) { return refusal }
                let state = replica.syncNow(timeout: 120)
                if let offline = state.offline {
                    return .failure(CommandError.Kind.ioError.rawValue, "provider \(provider) is offline: \(offline)")
                }
                return ControlResponse(ok: true)
            case .pin, .unpin:
                try replica.pin(item, action == .pin)
                return ControlResponse(ok: true)
            case .evict:
                return ControlResponse(ok: true, message: "\(try replica.evict(item)) files evicted")
            case .remoteChange, .remoteDelete:
                guard let id = replica.itemIdentifier(at: item), let remote = extensions.remoteFaults(provider) else {
                    return .failure(CommandError.Kind.unknown.rawValue, "no item \(provider)/\(item) in the replica")
                }
                if action == .remoteChange { remote.change(id) } else { remote.delete(id) }
                return ControlResponse(ok: true)
            case .restart:
                return restart(provider, replica, extensions)
            }
        } catch {
            let kind: CommandError.Kind =
                switch error.code {
                case .noSuchItem: .unknown
                case .busy: .refused
                default: .ioError
                }
            return .failure(kind.rawValue, "cannot \(action.rawValue) \(provider)/\(item): \(error.message)")
        }
    }

    /// Why a provider's extension cannot take a sync now, if it cannot: a
    /// failed one until its owner restarts it, one still starting after
    /// the wait a call gives it. 69 (unavailable), at once.
    private static func notRunning(_ provider: ProviderID, _ extensions: ExtensionProviders) -> ControlResponse? {
        guard let host = extensions.host(provider) else { return nil }
        if host.waitUntilRunning(timeout: host.tunables.waitForRunning) { return nil }
        return .failure(
            CommandError.Kind.noDaemon.rawValue,
            "provider \(provider) cannot sync: its extension is \(ExtensionProviders.describe(host.state)); "
                + "`scopefs provider restart \(provider)` starts it again")
    }

    /// `scopefs provider restart`: the extension starts again, its past
    /// exits forgotten (a failed provider runs again), with no remount; the
    /// replica pulls and pushes once it runs.
    private static func restart(_ provider: ProviderID, _ replica: ExtensionProvider, _ extensions: ExtensionProviders)
        -> ControlResponse
    {
        guard let host = extensions.host(provider) else {
            return .failure(CommandError.Kind.unknown.rawValue, "provider \(provider) has no extension running")
        }
        host.restart()
        guard host.waitUntilRunning(timeout: host.tunables.waitForRunning + host.tunables.initializeTimeout) else {
            return .failure(
                CommandError.Kind.noDaemon.rawValue,
                "provider \(provider): the extension did not start: \(ExtensionProviders.describe(host.state))")
        }
        replica.wake(pull: true, push: true)
        return ControlResponse(ok: true, message: "provider \(provider): \(ExtensionProviders.describe(host.state))")
    }
}
