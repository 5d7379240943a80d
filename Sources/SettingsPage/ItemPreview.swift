import CSystemShims
import Glibc
import HostText
import Policy

/// A document's preview as the mount gives it (`user.scopefs.thumbnail`,
/// SPEC S50), checked before the page serves it: a PNG of at most 64 KiB.
enum ItemPreview {
    static let limit = 64 << 10
    static let signature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]

    /// The preview of the file at `path` in the mount, nil when it has none
    /// (a folder, no preview, not visible) or it is not a PNG.
    static func read(_ path: String) -> [UInt8]? {
        var buffer = [UInt8](repeating: 0, count: limit)
        let count = path.withHostCString { getxattr($0, ControlAttributeName.thumbnail.rawValue, &buffer, limit) }
        guard count > signature.count, buffer.starts(with: signature) else { return nil }
        return Array(buffer[..<count])
    }

    /// The page's address of a grant's item's preview.
    static func address(_ grant: Grant, path: String) -> String {
        "/items/preview" + URLText.query([("app", grant.app), ("provider", grant.provider), ("path", path)])
    }
}
