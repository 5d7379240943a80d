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
}
