import Foundation
import Glibc
import Policy

/// Where a provider's extension keeps its things: `<state>/extensions/<id>/`
/// holds `files/` (the replica, the provider's directory), `staging/` (the
/// extension's only writable folder) and `replica.sqlite`.
public struct ExtensionLayout: Sendable {
    public let folder: String

    public init(state: StateDirectory, provider: ProviderID) {
        folder = state.path + "/extensions/" + provider
    }

    public var files: String { folder + "/files" }
    public var staging: String { folder + "/staging" }
    public var database: String { folder + "/replica.sqlite" }

    public func create() throws {
        for path in [folder, files, staging] {
            try FileManager.default.createDirectory(
                atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        }
        // Whatever a previous run staged and did not take is garbage now.
        for name in (try? FileManager.default.contentsOfDirectory(atPath: staging)) ?? [] {
            unlink(staging + "/" + name)
        }
    }
}

extension Provider {
    /// The provider as the host of `state` serves it: an extension's
    /// provider from its replica in that state directory. A fleet's store
    /// names the replica of the host that added the provider; each host
    /// keeps a replica of its own, fed by its own extension process
    /// (decision 63). A local folder, and any provider when `state` is
    /// nil, is served where the store says.
    public func served(from state: StateDirectory?) -> Provider {
        guard let state, `extension` != nil else { return self }
        var provider = self
        provider.directory = ExtensionLayout(state: state, provider: id).files
        return provider
    }
}
