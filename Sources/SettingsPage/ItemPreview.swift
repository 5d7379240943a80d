import CSystemShims
import Glibc
import HostText
import Policy

/// A document's preview as the mount gives it (`user.scopefs.thumbnail`,
/// SPEC S50), checked before the page serves it by the mount's own rule
/// (`ThumbnailLimits`: a PNG of at most 64 KiB).
enum ItemPreview {

    /// The preview of the file at `path` in the mount, nil when it has none
    /// (a folder, no preview, not visible) or it is not a PNG.
    static func read(_ path: String) -> [UInt8]? {
        var buffer = [UInt8](repeating: 0, count: ThumbnailLimits.bytes)
        let count = path.withHostCString {
            getxattr($0, ControlAttributeName.thumbnail.rawValue, &buffer, ThumbnailLimits.bytes)
        }
        guard count > 0 else { return nil }
        let preview = Array(buffer[..<count])
        return ThumbnailLimits.problem(preview) == nil ? preview : nil
    }

    /// The page's address of a grant's item's preview.
    static func address(_ grant: Grant, path: String) -> String {
        "/items/preview" + URLText.query([("app", grant.app), ("provider", grant.provider), ("path", path)])
    }
}
