import CommandErrors
import Foundation
import Glibc

/// What the developer adds to the default sandbox (issue 31): host paths
/// shown at the same place (read-only, or read-write), variables, and the
/// working directory. `scopefs run`, `test` and `chaos` take the same
/// options (`--share-net`, `--expose PATH[:rw]`, `--env`, `--cwd`).
public struct SandboxShape: Sendable, Equatable {
    /// A host path the sandbox shows at the same place.
    public struct Exposure: Sendable, Equatable {
        public var path: String
        public var writable: Bool

        public init(path: String, writable: Bool) {
            self.path = path
            self.writable = writable
        }

        /// `PATH`, `PATH:ro` or `PATH:rw`.
        public static func parse(_ text: String) -> Exposure {
            if text.hasSuffix(":rw") { return Exposure(path: String(text.dropLast(3)), writable: true) }
            if text.hasSuffix(":ro") { return Exposure(path: String(text.dropLast(3)), writable: false) }
            return Exposure(path: text, writable: false)
        }
    }

    public var shareNetwork = false
    public var exposed: [Exposure] = []
    /// Variables set in the sandbox, over the defaults.
    public var environment: [String: String] = [:]
    /// The working directory inside (nil: the app's container).
    public var workingDirectory: String?
    /// The session bus through xdg-dbus-proxy, portals only, and the
    /// app's documents folder of `scopefs portal` (`--portal-bus`).
    public var portalBus = false

    public init(
        shareNetwork: Bool = false, exposed: [Exposure] = [], environment: [String: String] = [:],
        workingDirectory: String? = nil, portalBus: Bool = false
    ) {
        self.portalBus = portalBus
        self.shareNetwork = shareNetwork
        self.exposed = exposed
        self.environment = environment
        self.workingDirectory = workingDirectory
    }

    /// Each exposed path must exist: a missing one is the caller's input
    /// error (66), said before anything starts.
    public func checkExposedPathsExist() throws(CommandError) {
        for exposure in exposed where access(exposure.path, F_OK) != 0 {
            throw CommandError(.noInput, "--expose \(exposure.path): no such file or folder on this machine")
        }
    }
}
