import Control
import Foundation
import Glibc
import Logging

/// Takes connections off a listening socket for as long as the daemon runs
/// (SPEC S40: "An error on the control socket's accept is retried, never
/// fatal"). Before, the first failed accept — EMFILE while apps held every
/// descriptor — ended the thread, and the owner's `status`, `revoke` and
/// `restore` went unanswered until the mount was gone (issue 29, finding 4).
///
/// Out of descriptors, the loop closes its reserve (a few descriptors held
/// from the start, `DescriptorReserve`) so the waiting connection can be
/// taken and served; the reserve is taken back once that request is done.
/// Any other error, or no reserve left, waits with a back-off (10 ms
/// doubling to 1 s) and tries again; the first failure of a run and every
/// hundredth after it are logged, so a long run does not flood the log.
struct AcceptLoop {
    let socket: UnixSocket
    let logger: Logger
    let endpoint: String
    /// Whether a connection may be served from the reserve (the owner's
    /// socket only: apps have their own descriptor budget).
    let reserve: DescriptorReserve?

    /// Set when the daemon stops: accept's failures then are the socket
    /// closing under it, not a reason to retry (nor to log).
    let stopping: @Sendable () -> Bool

    func run(serve: @escaping @Sendable (UnixSocket, _ whenDone: @escaping @Sendable () -> Void) -> Void) {
        var backoff = Backoff()
        var failures = 0
        while !stopping() {
            switch socket.accept() {
            case .success(let client):
                if failures > 0 {
                    logger.notice("\(endpoint) socket: accepting again after \(failures) failed accepts")
                }
                failures = 0
                backoff.reset()
                serve(client) {}
            case .failure(let error):
                if stopping() { return }
                failures += 1
                if failures == 1 || failures % 100 == 0 {
                    logger.error("\(endpoint) socket: accept failed (\(error.code)), \(failures) in a row; retrying")
                }
                if isOutOfDescriptors(error), let reserve, reserve.release() {
                    // The reserve's numbers are free now: take the waiting
                    // connection with one of them and serve it.
                    switch socket.accept() {
                    case .success(let client):
                        serve(client) { reserve.refill() }
                        continue
                    case .failure:
                        reserve.refill()
                    }
                }
                usleep(backoff.next())
            }
        }
    }

    private func isOutOfDescriptors(_ error: POSIXError) -> Bool {
        error.code == .EMFILE || error.code == .ENFILE
    }

    /// 10 ms, doubling up to 1 s.
    struct Backoff {
        private var current: useconds_t = 10_000
        mutating func next() -> useconds_t {
            defer { current = min(current * 2, 1_000_000) }
            return current
        }
        mutating func reset() { current = 10_000 }
    }
}
