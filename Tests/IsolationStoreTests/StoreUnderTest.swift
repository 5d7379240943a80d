import CommandErrors
import FleetStore
import Foundation
import PolicyStore
import Testing

/// The two stores the contract runs against (decision 59).
enum StoreKind: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqlite
    case postgresql

    var testDescription: String { rawValue }
}

/// One store with a provider `local` (a folder `docs` holding `a.txt`) and
/// an app `com.example.app`, in a temporary folder removed by `close`.
struct StoreUnderTest {
    let store: any IsolationStore
    let root: String
    let app = "com.example.app"
    private let fleet: FleetDatabase?

    init(_ kind: StoreKind) throws {
        root = NSTemporaryDirectory() + "scopefs-contract-\(UUID().uuidString)"
        let provider = root + "/provider"
        try FileManager.default.createDirectory(atPath: provider + "/docs", withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: provider + "/docs/a.txt", contents: Data("a".utf8))
        switch kind {
        case .sqlite:
            store = PolicyRepository(database: try PolicyDatabase.create(StateDirectory(path: root + "/state")))
            fleet = nil
        case .postgresql:
            let database = try ThrowawayPostgres.shared.get().freshDatabase()
            let repository = FleetRepository(database: database)
            try repository.migrate()
            store = repository
            fleet = database
        }
        _ = try store.addProvider(id: "local", directory: provider, name: nil)
        _ = try store.addApp(id: app, name: nil)
    }

    var providerDirectory: String { root + "/provider" }

    func close() {
        fleet?.disconnect()
        try? FileManager.default.removeItem(atPath: root)
    }
}
