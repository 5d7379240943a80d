import CommandErrors
import FleetStore
import Foundation
import Logging
import PostgresNIO
import Synchronization

/// A daemon's link to the fleet's shared store (SPEC S44): when it last
/// reached the database, the lease that allows serving without it, and the
/// LISTEN connection whose notifications wake the reloader. A missed
/// notification costs nothing but time: every wake, and every tick, compares
/// the store's policy version with the one served (resync by version).
final class FleetLink: Sendable {
    let repository: FleetRepository
    let lease: Double
    private let logger: Logger
    private let contact: Mutex<(reached: Double, lostSince: Double?, reason: String?)>
    private let wake = DispatchSemaphore(value: 0)
    /// The LISTEN connection, closed to make the listener connect again.
    private let listening = Mutex<PostgresConnection?>(nil)
    /// This host's app processes, for the heartbeat (`scopefs fleet hosts`).
    private let processes = Mutex<(@Sendable () -> [FleetProcess])?>(nil)

    func reportProcesses(_ list: @escaping @Sendable () -> [FleetProcess]) {
        processes.withLock { $0 = list }
    }

    init(repository: FleetRepository, logger: Logger) {
        self.repository = repository
        self.lease = repository.database.configuration.leaseSeconds
        self.logger = logger
        self.contact = Mutex((Date().timeIntervalSince1970, nil, nil))
    }

    var description: String { repository.database.endpoint.description }
    var hostName: String { repository.database.configuration.hostName }

    func reached() {
        contact.withLock { $0 = (Date().timeIntervalSince1970, nil, nil) }
    }

    func lost(_ reason: String) {
        let first = contact.withLock { contact -> Bool in
            defer { contact.reason = reason }
            if contact.lostSince == nil {
                contact.lostSince = Date().timeIntervalSince1970
                return true
            }
            return false
        }
        // The LISTEN connection may be as dead as this one, silently (a partition).
        if first { dropListener() }
    }

    /// Why the lease ran out, or nil while it holds.
    func leaseExpired() -> String? {
        contact.withLock { contact in
            let now = Date().timeIntervalSince1970
            guard contact.lostSince != nil, now - contact.reached > lease else { return nil }
            return
                "host \(hostName) lost the fleet database \(description) \(Int(now - contact.reached)) s ago (lease \(lease) s): \(contact.reason ?? "unreachable")"
        }
    }

    /// The reloader's loop: a reload on each notification and at least
    /// every tick, a heartbeat row now and then, until `stop`.
    func follow(_ reloader: PolicyReloader, until stop: @escaping @Sendable () -> Bool) {
        Thread.detachNewThread { [self] in listen(until: stop) }
        let tick = min(1.0, lease / 4)
        var lastBeat = 0.0
        while !stop() {
            _ = wake.wait(timeout: .now() + tick)
            do { try reloader.reload() } catch { logger.error("fleet reload failed: \(error)") }
            let now = Date().timeIntervalSince1970
            // At least three beats a lease: other hosts judge this host's
            // claims live by its heartbeat (FleetClaims.live).
            if now - lastBeat > min(2, lease / 3) {
                lastBeat = now
                let live = processes.withLock { $0 }?() ?? []
                try? repository.heartbeat(
                    version: reloader.servedVersion, failure: reloader.failure, lease: lease, processes: live)
            }
        }
    }

    private func dropListener() {
        let connection = listening.withLock { value -> PostgresConnection? in
            defer { value = nil }
            return value
        }
        // Ends the listener's loop, which closes it again (harmless) and frees it.
        connection?.close().whenComplete { _ in _ = connection }
    }

    /// LISTENs on its own connection and wakes the reloader for each
    /// notification; after any break it connects again and wakes the
    /// reloader once, which resyncs by version.
    private func listen(until stop: @escaping @Sendable () -> Bool) {
        let database = repository.database
        let wake = self.wake
        while !stop() {
            let done = DispatchSemaphore(value: 0)
            Task { [self] in
                defer { done.signal() }
                let connection: PostgresConnection
                do {
                    connection = try await database.listeningConnection()
                } catch {
                    logger.debug("fleet LISTEN connection failed: \(error)")
                    return
                }
                listening.withLock { $0 = connection }
                wake.signal()  // anything missed while not listening
                do {
                    try await connection.listen(on: FleetRepository.channel) { notifications in
                        for try await _ in notifications {
                            wake.signal()
                            if stop() { break }
                        }
                    }
                } catch {
                    logger.debug("fleet LISTEN connection ended: \(error)")
                }
                listening.withLock { if $0 === connection { $0 = nil } }
                // postgres-nio requires a close before the connection is freed.
                try? await connection.close()
            }
            done.wait()
            if !stop() { usleep(200_000) }
        }
    }
}
