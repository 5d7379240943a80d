import Foundation

/// The page's secrets, new at each start (SPEC S46). The token is the key
/// to the page: printed once and written to a 0600 file, it is traded for
/// an HttpOnly, SameSite=Strict cookie on the first visit. The CSRF token is
/// in every form the page serves and must come back with every change.
/// A token of an earlier start opens nothing.
public struct SettingsSecrets: Sendable {
    public let token: String
    public let csrf: String

    public init(token: String = SettingsSecrets.random(), csrf: String = SettingsSecrets.random()) {
        self.token = token
        self.csrf = csrf
    }

    /// 32 bytes from the kernel's generator (getrandom), as hex.
    public static func random() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<32).map { _ in
            let byte = UInt8.random(in: 0...255, using: &generator)
            return (byte < 16 ? "0" : "") + String(byte, radix: 16)
        }.joined()
    }

    /// Compares in time that depends on the lengths only, so that a guess
    /// learns nothing from how long the refusal took.
    static func matches(_ given: String?, _ expected: String) -> Bool {
        guard let given else { return false }
        let (a, b) = (Array(given.utf8), Array(expected.utf8))
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for index in 0..<a.count { difference |= a[index] ^ b[index] }
        return difference == 0
    }

    public static let cookieName = "scopefs_settings"
}
