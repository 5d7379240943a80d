import ArgumentParser
import CommandErrors
import Control
import Foundation
import Policy
import PolicyStore

/// The owner's side of file coordination for `export` and `move` (issue
/// 17): before writing, claim the container item and its destination for
/// writing through the daemon, so that apps coordinating on them are asked
/// to relinquish and their writes do not interleave with the copy. An app
/// cannot stop the owner: after `wait` seconds the daemon takes the claims
/// anyway and names the apps that still held them, which is printed as a
/// note. With no daemon running nobody can hold a claim: nothing to do.
struct TransferCoordination {
    static let defaultWait: Double = 10

    let state: StateDirectory
    let wait: Double

    /// The items an export or move of `containerPath` into `folder` writes.
    static func items(app: AppID, containerPath: String, provider: ProviderID, folder: String) -> [TransferItem] {
        let name = RelativePath.lastComponent(of: containerPath)
        return [
            .container(app, containerPath),
            .provider(provider, RelativePath.join(RelativePath.normalize(folder) ?? folder, name)),
        ]
    }

    func withClaims<T>(_ items: [TransferItem], _ body: () throws(CommandError) -> T) throws(CommandError) -> T {
        let claims = try claim(items)
        defer { release(claims) }
        return try body()
    }

    func claim(_ items: [TransferItem]) throws(CommandError) -> [UInt64] {
        guard FileManager.default.fileExists(atPath: state.controlSocketPath) else { return [] }
        let response: ControlResponse
        do {
            response = try ControlClient.send(
                .claimForTransfer(items, wait: wait), state: state, timeoutSeconds: Int(wait.rounded(.up)) + 30)
        } catch  where error.kind == .noDaemon {
            return []  // a socket left by a crashed daemon
        }
        guard response.ok else {
            throw CommandError(
                CommandError.Kind(rawValue: response.code ?? 70) ?? .internalError,
                "cannot coordinate with apps: \(response.message ?? "the daemon refused")")
        }
        if let message = response.message { note("file coordination: \(message)") }
        return response.claims ?? []
    }

    func release(_ claims: [UInt64]) {
        for claim in claims {
            _ = try? ControlClient.send(.release(claim: claim), state: state)
        }
    }
}

/// `--coordination-wait` of the commands that export and move.
struct CoordinationOptions: ParsableArguments {
    @Option(
        name: .customLong("coordination-wait"),
        help:
            "export, move: seconds to wait for apps holding claims on the items (file coordination) before going ahead anyway."
    )
    var wait: Double = TransferCoordination.defaultWait

    func validate() throws {
        if wait < 0 || wait > 60 { throw ValidationError("--coordination-wait must be between 0 and 60 seconds") }
    }
}
