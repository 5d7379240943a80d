import Documents
import ScopeFS

/// The owner's freedesktop cache serves local providers' previews in the
/// mount (SPEC S50).
extension FreedesktopThumbnails: LocalThumbnails {}
