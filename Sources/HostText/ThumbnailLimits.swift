/// What a preview of an item may be (SPEC S50), checked wherever one
/// comes in: from an extension (`thumbnail`), from an app that saves one
/// (`user.scopefs.thumbnail`), from the freedesktop cache.
public enum ThumbnailLimits {
    /// The largest preview, in bytes: what one extended attribute can hold
    /// (the kernel's XATTR_SIZE_MAX), since apps read previews as one
    /// (`user.scopefs.thumbnail`, docs/API.md).
    public static let bytes = 65536
    /// The longest side, in pixels, the daemon asks for: the freedesktop
    /// cache's "large" size, which fits the byte limit.
    public static let size = 256
    /// Every PNG file starts with these eight bytes.
    public static let pngSignature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]

    /// Why `bytes` is not a preview the mount serves, or nil.
    public static func problem(_ bytes: [UInt8]) -> String? {
        if bytes.count > Self.bytes { return "\(bytes.count) bytes, more than \(Self.bytes)" }
        guard bytes.count > pngSignature.count, Array(bytes.prefix(pngSignature.count)) == pngSignature else {
            return "not a PNG file (its signature is missing)"
        }
        return nil
    }
}
