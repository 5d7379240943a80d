import CommandErrors
import FleetStore
import Foundation
import Testing

/// How a fleet's database is named and logged into (SPEC S44): never a
/// password on the command line, a password file only its owner reads,
/// and no plain text to a remote server.
@Suite struct FleetConfigurationTests {
    func configuration(_ url: String, passwordFile: String? = nil) throws(CommandError) -> FleetConfiguration {
        try FleetConfiguration(url: url, passwordFile: passwordFile, hostName: "h", leaseSeconds: nil)
    }

    func failure(_ body: () throws(CommandError) -> Void) -> CommandError? {
        do throws(CommandError) {
            try body()
            return nil
        } catch {
            return error
        }
    }

    @Test func loopbackDefaultsToNoTLSAndRemoteToVerifyFull() throws {
        #expect(try configuration("postgresql://u@127.0.0.1:5433/db").endpoint().sslMode == .disable)
        let remote = try configuration("postgresql://u@db.example.org/db").endpoint()
        #expect(remote.sslMode == .verifyFull && remote.port == 5432 && remote.database == "db")
        #expect(try configuration("postgresql://u@10.0.0.5/db?sslmode=require").endpoint().sslMode == .require)
        #expect(try configuration("postgresql://u@127.0.0.1/db").leaseSeconds == FleetConfiguration.defaultLease)
    }

    @Test func aPasswordInTheURLIsRefused() {
        let error = failure { () throws(CommandError) in _ = try configuration("postgresql://u:secret@127.0.0.1/db") }
        #expect(error?.kind == .usage)
        #expect(error?.message.contains("secret") == false)
    }

    @Test func plainTextToARemoteServerIsRefused() {
        let error = failure { () throws(CommandError) in
            _ = try configuration("postgresql://u@db.example.org/db?sslmode=disable")
        }
        #expect(error?.kind == .usage)
    }

    @Test func aURLWithoutUserOrDatabaseOrOfAnotherSchemeIsRefused() {
        for url in ["postgresql://127.0.0.1/db", "postgresql://u@127.0.0.1/", "mysql://u@127.0.0.1/db", "db"] {
            #expect(failure { () throws(CommandError) in _ = try configuration(url) }?.kind == .usage, "\(url)")
        }
    }

    @Test func aPasswordFileOpenToOthersIsRefused() throws {
        let path = NSTemporaryDirectory() + "scopefs-fleet-pw-\(UUID().uuidString)"
        defer { unlink(path) }
        try Data("pw\n".utf8).write(to: URL(fileURLWithPath: path))
        chmod(path, 0o644)
        let open = failure { () throws(CommandError) in _ = try FleetConfiguration.readSecret(path) }
        #expect(open?.kind == .refused)
        chmod(path, 0o600)
        #expect(try FleetConfiguration.readSecret(path) == "pw")
        let config = try configuration("postgresql://u@127.0.0.1/db", passwordFile: path)
        #expect(try config.password(environment: ["PGPASSWORD": "env"]) == "pw")
        let noFile = try configuration("postgresql://u@127.0.0.1/db")
        #expect(try noFile.password(environment: ["PGPASSWORD": "env"]) == "env")
    }

    @Test func aLeaseOutOfRangeIsRefused() {
        for lease in [0.0, -1, 100_000] {
            let error = failure { () throws(CommandError) in
                _ = try FleetConfiguration(
                    url: "postgresql://u@127.0.0.1/db", passwordFile: nil, hostName: "h", leaseSeconds: lease)
            }
            #expect(error?.kind == .usage)
        }
    }
}
