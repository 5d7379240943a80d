import CommandErrors
import FleetStore
import Foundation
import PostgresNIO

/// A PostgreSQL server of this test process's own, as Tests/fleet starts
/// one: Debian's postgresql-15 binaries, `initdb` into a temporary folder
/// (as the `postgres` user when run as root, which initdb refuses), on a
/// unix socket only (no TCP port to collide on), trust logins for its one
/// role. Started on first use, stopped at exit. Not installed is a
/// failure, never a skip: `make deps` installs it.
final class ThrowawayPostgres: Sendable {
    static let shared = Result { () throws(CommandError) in try ThrowawayPostgres() }

    let root: String
    let socketFolder: String
    let port: Int
    static let role = "scopefs_test_owner"

    private init() throws(CommandError) {
        guard let bin = Self.binaries() else {
            throw CommandError(
                .badState,
                "PostgreSQL's server is not installed (no /usr/lib/postgresql/*/bin/initdb): `make deps` installs postgresql-15; the store contract runs against both stores"
            )
        }
        root = NSTemporaryDirectory() + "scopefs-pgtest-\(UUID().uuidString.prefix(8))"
        socketFolder = root + "/socket"
        port = 40000 + Int(getpid() % 20000)
        let data = root + "/data"
        do {
            try FileManager.default.createDirectory(atPath: socketFolder, withIntermediateDirectories: true)
        } catch {
            throw CommandError(.ioError, "cannot create \(socketFolder): \(error)")
        }
        if getuid() == 0 {
            guard let postgres = getpwnam("postgres") else {
                throw CommandError(.badState, "no postgres account to run the test server as")
            }
            for path in [root, socketFolder] { chown(path, postgres.pointee.pw_uid, postgres.pointee.pw_gid) }
        }
        try Self.run(bin + "/initdb", ["-D", data, "-U", Self.role, "--auth=trust", "-E", "UTF8", "--no-sync"])
        try Self.run(
            bin + "/pg_ctl",
            [
                "-D", data, "-l", root + "/server.log", "-w", "-t", "60", "start", "-o",
                "-c listen_addresses='' -k \(socketFolder) -p \(port) -c fsync=off -c max_connections=200",
            ])
        ThrowawayPostgres.stopAtExit(bin: bin, data: data, root: root)
    }

    /// A new, migrated database for one test: tests run in parallel and
    /// must not see each other's rows or policy versions.
    func freshDatabase() throws(CommandError) -> FleetDatabase {
        let name = "t_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        let admin = try FleetDatabase(configuration(database: "postgres"))
        try admin.run { connection in
            try await connection.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"), logger: Self.logger)
        }
        admin.disconnect()
        return try FleetDatabase(configuration(database: name))
    }

    func configuration(database: String) throws(CommandError) -> FleetConfiguration {
        try FleetConfiguration(
            url: "postgresql://\(Self.role)@localhost:\(port)/\(database)?host=\(socketFolder)", passwordFile: nil,
            hostName: "test-host", leaseSeconds: nil)
    }

    static let logger = Logger(label: "scopefs.test.postgres")

    private static func binaries() -> String? {
        let base = "/usr/lib/postgresql"
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: base)) ?? []
        return versions.sorted { (Int($0) ?? 0) < (Int($1) ?? 0) }.map { "\(base)/\($0)/bin" }
            .last { FileManager.default.isExecutableFile(atPath: $0 + "/initdb") }
    }

    /// Runs a server tool (as `postgres` under root) and waits for it,
    /// through the shell: Foundation's `Process` never saw `pg_ctl start`
    /// end here (the server it leaves behind), `system` does.
    private static func run(_ tool: String, _ arguments: [String]) throws(CommandError) {
        let log = NSTemporaryDirectory() + "scopefs-pgtool-\(UUID().uuidString).log"
        defer { unlink(log) }
        let quoted = ([tool] + arguments).map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }
        let user = getuid() == 0 ? "/usr/sbin/runuser -u postgres -- " : ""
        let status = system("cd /tmp && \(user)\(quoted.joined(separator: " ")) </dev/null >'\(log)' 2>&1")
        guard status == 0 else {
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            throw CommandError(.ioError, "\(tool) failed (status \(status)): \(text)")
        }
    }

    /// The command that stops the server and removes its folder, run by
    /// `atexit` (a test process has no other end to hook).
    nonisolated(unsafe) private static var stopCommand: String?

    private static func stopAtExit(bin: String, data: String, root: String) {
        let user = getuid() == 0 ? "/usr/sbin/runuser -u postgres -- " : ""
        stopCommand =
            "\(user)\(bin)/pg_ctl -D '\(data)' -m immediate stop >/dev/null 2>&1; rm -rf '\(root)'"
        atexit {
            if let command = ThrowawayPostgres.stopCommand { _ = system(command) }
        }
    }
}
