import CommandErrors
import Dispatch
import Foundation
import PostgresNIO
import Synchronization

/// One connection to the fleet's PostgreSQL server, used from plain
/// (blocking) threads as the rest of ScopeFS uses SQLite: each call waits
/// for its answer. The connection is made again on the next call after it
/// broke; a call that cannot reach the server fails with exit code 74.
public final class FleetDatabase: Sendable {
    public let configuration: FleetConfiguration
    public let endpoint: FleetEndpoint
    private let password: String?
    private let connection = Mutex<PostgresConnection?>(nil)
    /// One caller at a time: a transaction's statements must not interleave.
    private let serial = NSLock()
    static let logger = Logger(label: "scopefs.fleet")
    /// How long one call may wait for the server ($SCOPEFS_FLEET_TIMEOUT,
    /// seconds): the daemon's lease is measured with calls that end.
    let timeout: Double
    static let defaultTimeout = ProcessInfo.processInfo.environment["SCOPEFS_FLEET_TIMEOUT"].flatMap(Double.init) ?? 3
    struct TimedOut: Error {}

    /// `timeout`: shorter than the default where someone waits on every
    /// call (shell completion).
    public init(_ configuration: FleetConfiguration, timeout: Double? = nil) throws(CommandError) {
        self.timeout = timeout ?? Self.defaultTimeout
        self.configuration = configuration
        self.endpoint = try configuration.endpoint()
        self.password = try configuration.password()
    }

    /// Runs `body` on the connection (made now if needed), waiting for it
    /// at most `timeout` seconds (`SCOPEFS_FLEET_TIMEOUT`) and `extra` more
    /// (a body that moves many rows).
    public func run<T: Sendable>(extra: Double = 0, _ body: @escaping @Sendable (PostgresConnection) async throws -> T)
        throws(CommandError) -> T
    {
        serial.lock()
        defer { serial.unlock() }
        do {
            let connection = try Self.wait(timeout: timeout) { try await self.connected() }
            do {
                return try Self.wait(timeout: timeout + extra) { try await body(connection) }
            } catch {
                // A call that timed out (a partition: TCP waits minutes) or
                // broke leaves the connection in doubt: the next call makes a new one.
                if connection.isClosed || error is TimedOut {
                    self.connection.withLock { $0 = nil }
                    connection.close().whenComplete { _ in _ = connection }  // alive until closed
                }
                throw error
            }
        } catch {
            throw describe(error)
        }
    }

    /// `body` in one transaction: committed when it returns, rolled back
    /// when it throws. `snapshot`: a read-only one whose statements all see
    /// the tables as they were at its first (REPEATABLE READ).
    public func transaction<T: Sendable>(
        extra: Double = 0, snapshot: Bool = false, _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) throws(CommandError) -> T {
        try run(extra: extra) { connection in
            try await connection.query(
                snapshot ? "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY" : "BEGIN", logger: Self.logger)
            do {
                let value = try await body(connection)
                try await connection.query("COMMIT", logger: Self.logger)
                return value
            } catch {
                _ = try? await connection.query("ROLLBACK", logger: Self.logger)
                throw error
            }
        }
    }

    // postgres-nio requires a connection to be closed before it is freed.
    deinit { disconnect() }

    /// Drops the connection (a test's partition, a daemon's reconnect).
    public func disconnect() {
        let old = connection.withLock { value -> PostgresConnection? in
            defer { value = nil }
            return value
        }
        if let old { _ = try? Self.wait { try await old.close() } }
    }

    /// A connection of its own, for LISTEN (the daemon's `FleetLink`).
    public func listeningConnection() async throws -> PostgresConnection { try await openConnection() }

    func openConnection() async throws -> PostgresConnection {
        let tls: PostgresConnection.Configuration.TLS
        switch endpoint.sslMode {
        case .disable: tls = .disable
        case .require:
            var config = TLSConfiguration.makeClientConfiguration()
            config.certificateVerification = .none  // libpq's `require`: encrypted, not verified
            tls = .require(try NIOSSLContext(configuration: config))
        case .verifyFull:
            tls = .require(try NIOSSLContext(configuration: .makeClientConfiguration()))
        }
        var config: PostgresConnection.Configuration
        if let folder = endpoint.socketFolder {
            config = .init(
                unixSocketPath: "\(folder)/.s.PGSQL.\(endpoint.port)", username: endpoint.user, password: password,
                database: endpoint.database)
        } else {
            config = .init(
                host: endpoint.host, port: endpoint.port, username: endpoint.user, password: password,
                database: endpoint.database, tls: tls)
        }
        config.options.connectTimeout = .seconds(3)
        // Every query here is short, or a stream of rows: PostgreSQL's JIT
        // compiles a query whose plan looks costly, and compiling the change
        // log's read took 30-300 ms where running it took 1 (issue 34).
        config.options.additionalStartupParameters = [("jit", "off")]
        return try await PostgresConnection.connect(configuration: config, id: 1, logger: Self.logger)
    }

    private func connected() async throws -> PostgresConnection {
        if let existing = connection.withLock({ $0 }), !existing.isClosed { return existing }
        let made = try await openConnection()
        // A connect that outlived its caller's timeout may land after
        // another one: the connection it replaces must be closed, not dropped.
        let replaced = connection.withLock { current -> PostgresConnection? in
            defer { current = made }
            return current
        }
        if let replaced, replaced !== made { replaced.close().whenComplete { _ in _ = replaced } }
        return made
    }

    /// Waits on this (non-async) thread for an async body.
    static func wait<T: Sendable>(timeout: Double = 30, _ body: @escaping @Sendable () async throws -> T) throws -> T {
        let result = Mutex<Result<T, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task(executorPreference: BridgeExecutor.shared) {
            let outcome: Result<T, any Error>
            do { outcome = .success(try await body()) } catch { outcome = .failure(error) }
            result.withLock { $0 = outcome }
            done.signal()
        }
        if done.wait(timeout: .now() + timeout) == .timedOut { throw TimedOut() }
        return try result.withLock { $0! }.get()
    }

    /// A people-facing error: the server's message and SQLSTATE, never the password.
    func describe(_ error: any Error) -> CommandError {
        if let error = error as? CommandError { return error }
        if error is TimedOut {
            return CommandError(
                .ioError, "fleet database \(endpoint.description) did not answer within \(timeout) s")
        }
        if let error = error as? PSQLError {
            if let message = error.serverInfo?[.message] {
                let state = error.serverInfo?[.sqlState] ?? ""
                // 42501: insufficient_privilege, a role's missing right (SECURITY.md).
                let kind: CommandError.Kind = state == "42501" ? .refused : .ioError
                return CommandError(kind, "fleet database \(endpoint.description): \(message) (SQLSTATE \(state))")
            }
            return CommandError(
                .ioError, "fleet database \(endpoint.description) is unreachable: \(String(reflecting: error.code))")
        }
        return CommandError(.ioError, "fleet database \(endpoint.description) is unreachable: \(error)")
    }
}

/// Where the async bodies of `FleetDatabase.wait` run: threads of their
/// own, not Swift's cooperative pool. A caller that blocks a cooperative
/// thread (a test function; anything called from async code) would
/// otherwise wait for a task that has no thread left to run on, on a
/// machine with as few threads in the pool as cores.
final class BridgeExecutor: TaskExecutor {
    static let shared = BridgeExecutor()
    private let queue = DispatchQueue(label: "scopefs.fleet.bridge", attributes: .concurrent)

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
