import CommandErrors
import Foundation
import PolicyStore

/// Where a state directory's shared isolation layer lives (SPEC S44), as
/// `scopefs init --database` recorded it in `fleet.json`. Never a password:
/// that comes from a file only its owner can read, or from PGPASSWORD.
public struct FleetConfiguration: Codable, Sendable, Equatable {
    /// postgresql://USER@HOST[:PORT]/DATABASE[?sslmode=MODE], no password.
    public var url: String
    /// A file holding the password (mode 0600 or stricter, owned by the caller).
    public var passwordFile: String?
    /// This host's name in events, status and privacy (default: hostname).
    public var hostName: String
    /// How long the daemon keeps serving its grants without the database.
    public var leaseSeconds: Double

    public static let defaultLease = 30.0
    public static let fileName = "fleet.json"

    public init(url: String, passwordFile: String?, hostName: String?, leaseSeconds: Double?) throws(CommandError) {
        self.url = url
        self.passwordFile = passwordFile
        self.hostName = hostName ?? FleetConfiguration.systemHostName()
        self.leaseSeconds = leaseSeconds ?? Self.defaultLease
        _ = try endpoint()
        guard self.leaseSeconds > 0, self.leaseSeconds <= 86_400 else {
            throw CommandError(.usage, "--lease must be between 0 and 86400 seconds, not \(self.leaseSeconds)")
        }
        guard !self.hostName.isEmpty, self.hostName.count <= 200, !self.hostName.contains(where: \.isNewline) else {
            throw CommandError(.usage, "--host-name must be 1 to 200 characters on one line")
        }
    }

    /// The configuration of a state directory, or nil when its isolation
    /// layer is the SQLite file (the default).
    public static func load(_ state: StateDirectory) throws(CommandError) -> FleetConfiguration? {
        let path = state.path + "/" + fileName
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        do {
            return try JSONDecoder().decode(FleetConfiguration.self, from: data)
        } catch {
            throw CommandError(
                .badState, "\(path) is not a fleet configuration (\(error)); run `scopefs init --database` again")
        }
    }

    public func save(_ state: StateDirectory) throws(CommandError) {
        let path = state.path + "/" + Self.fileName
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        do {
            try encoder.encode(self).write(to: URL(fileURLWithPath: path), options: .atomic)
            chmod(path, 0o600)
        } catch {
            throw CommandError(.ioError, "cannot write \(path): \(error)")
        }
    }

    public static func systemHostName() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count) == 0 else { return "localhost" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The parts of `url`: a password in it is refused, since a command
    /// line is visible to every local user (ps, /proc/PID/cmdline).
    public func endpoint() throws(CommandError) -> FleetEndpoint {
        guard let parts = URLComponents(string: url), let scheme = parts.scheme,
            scheme == "postgresql" || scheme == "postgres"
        else {
            throw CommandError(.usage, "--database must be a postgresql://USER@HOST[:PORT]/DATABASE URL, not \(url)")
        }
        if parts.password != nil {
            throw CommandError(
                .usage,
                "the database URL must not hold a password (it would show in the process list); put it in a file of mode 0600 (--password-file) or in PGPASSWORD"
            )
        }
        guard let user = parts.user, !user.isEmpty else {
            throw CommandError(.usage, "the database URL names no user: postgresql://USER@HOST/DATABASE")
        }
        let database = String(parts.path.drop { $0 == "/" })
        guard !database.isEmpty else {
            throw CommandError(.usage, "the database URL names no database: postgresql://USER@HOST/DATABASE")
        }
        let query = Dictionary(
            (parts.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { _, last in last })
        // A socket folder as the host (`?host=/run/postgresql`), as libpq takes it.
        let socketFolder = query["host"].flatMap { $0.hasPrefix("/") ? $0 : nil }
        let host = parts.host ?? ""
        let sslMode = try FleetEndpoint.SSLMode(query["sslmode"], host: socketFolder == nil ? host : "")
        return FleetEndpoint(
            host: host, port: parts.port ?? 5432, socketFolder: socketFolder, user: user, database: database,
            sslMode: sslMode)
    }

    /// The password: the file's (checked), else PGPASSWORD, else none
    /// (the server's trust or peer rule decides).
    public func password(environment: [String: String] = ProcessInfo.processInfo.environment) throws(CommandError)
        -> String?
    {
        if let passwordFile { return try Self.readSecret(passwordFile) }
        return environment["PGPASSWORD"]
    }

    /// Reads a secret file only if no one but its owner, who must be the
    /// caller (or root), can read or change it.
    public static func readSecret(_ path: String) throws(CommandError) -> String {
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw CommandError(.noInput, "password file \(path): \(String(cString: strerror(errno)))")
        }
        guard info.st_uid == getuid() || info.st_uid == 0 else {
            throw CommandError(.refused, "password file \(path) belongs to uid \(info.st_uid), not to you; refused")
        }
        guard info.st_mode & 0o077 == 0 else {
            throw CommandError(
                .refused,
                "password file \(path) is open to others (mode \(String(info.st_mode & 0o777, radix: 8))); run `chmod 600 \(path)`"
            )
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw CommandError(.noInput, "cannot read password file \(path)")
        }
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .newlines)
    }
}

/// A database server's address, user and TLS mode.
public struct FleetEndpoint: Sendable, Equatable {
    /// libpq's sslmode names. `disable` is taken only for loopback and a
    /// unix socket; a remote server needs `require` or `verify-full`.
    public enum SSLMode: String, Sendable {
        case disable, require
        case verifyFull = "verify-full"

        init(_ value: String?, host: String) throws(CommandError) {
            let local = host.isEmpty || host == "localhost" || host.hasPrefix("127.") || host == "::1"
            guard let value else {
                self = local ? .disable : .verifyFull
                return
            }
            guard let mode = SSLMode(rawValue: value) else {
                throw CommandError(.usage, "sslmode=\(value) is not one of disable, require, verify-full")
            }
            if mode == .disable && !local {
                throw CommandError(
                    .usage,
                    "sslmode=disable is refused for the remote server \(host): grants and revokes would cross the network in clear; use sslmode=require or verify-full"
                )
            }
            self = mode
        }
    }

    public var host: String
    public var port: Int
    public var socketFolder: String?
    public var user: String
    public var database: String
    public var sslMode: SSLMode

    /// For messages: never the password.
    public var description: String {
        socketFolder.map { "\(user)@\($0)/.s.PGSQL.\(port)/\(database)" } ?? "\(user)@\(host):\(port)/\(database)"
    }
}
