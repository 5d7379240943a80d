import Documents
import ScopeFS

/// The owner's freedesktop cache serves local providers' previews in the
/// mount (SPEC S50).
extension FreedesktopThumbnails: LocalThumbnails {}

/// The previews of extensions' documents the owner's file manager finds in
/// the same cache, under the documents' paths in the mount (SPEC S50).
struct OwnerPreviewCache: OwnerPreviewKeeper {
    let cache: FreedesktopThumbnails
    let mountpoint: String

    func isKept(viewPath: String, mtime: Int) -> Bool {
        cache.isKept(forPath: mountpoint + viewPath, mtime: mtime)
    }

    func keep(_ png: [UInt8], viewPath: String, mtime: Int) {
        try? cache.keep(png, forPath: mountpoint + viewPath, mtime: mtime)
    }
}
