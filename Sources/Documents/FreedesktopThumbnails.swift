import Crypto
import Foundation
import Glibc
import HostText

/// The freedesktop Thumbnail Managing Standard's cache of the owner
/// (`$XDG_CACHE_HOME/thumbnails/{large,normal,x-large,xx-large}/MD5(URI).png`),
/// where file managers keep the previews they made: a local provider's
/// item shows the owner's preview of its host file (SPEC S50). A preview
/// whose `Thumb::MTime` is not the file's mtime is stale (the standard's
/// rule) and not shown.
public struct FreedesktopThumbnails: Sendable {
    public let cache: String
    /// The sizes looked at, the daemon's own size first; each must fit
    /// `ThumbnailLimits.bytes`.
    static let folders = ["large", "normal", "x-large", "xx-large"]

    public init(cache: String) { self.cache = cache }

    /// The cache of the user the daemon runs as (the mount's owner).
    public static func ofOwner(_ environment: [String: String] = ProcessInfo.processInfo.environment)
        -> FreedesktopThumbnails
    {
        if let xdg = environment["XDG_CACHE_HOME"], xdg.hasPrefix("/") {
            return FreedesktopThumbnails(cache: xdg + "/thumbnails")
        }
        var home = environment["HOME"] ?? ""
        if home.isEmpty, let entry = getpwuid(getuid()), let dir = entry.pointee.pw_dir { home = String(cString: dir) }
        return FreedesktopThumbnails(cache: home + "/.cache/thumbnails")
    }

    public func thumbnail(hostPath path: String) -> [UInt8]? {
        var info = stat()
        guard lstat(path, &info) == 0 else { return nil }
        let name = Self.cacheName(of: path)
        for folder in Self.folders {
            guard let data = FileManager.default.contents(atPath: "\(cache)/\(folder)/\(name)") else { continue }
            let bytes = [UInt8](data)
            guard ThumbnailLimits.problem(bytes) == nil else { continue }
            if let mtime = Self.textChunks(bytes)["Thumb::MTime"], Int(mtime) != Int(info.st_mtim.tv_sec) { continue }
            return bytes
        }
        return nil
    }

    /// MD5 of the file's URI, in lower-case hex, and ".png".
    public static func cacheName(of path: String) -> String {
        let digest = Insecure.MD5.hash(data: Data(uri(of: path).utf8))
        return digest.map { String(format: "%02x", $0) }.joined() + ".png"
    }

    /// `file://` and the path with every byte but the unreserved ones and
    /// `/` escaped, as GLib's `g_filename_to_uri` writes it.
    public static func uri(of path: String) -> String {
        let kept = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,;=:@/".utf8)
        var out = "file://"
        for byte in path.utf8 {
            if kept.contains(byte) {
                out.append(Character(UnicodeScalar(byte)))
            } else {
                out += String(format: "%%%02X", byte)
            }
        }
        return out
    }

    /// A PNG's tEXt chunks (keyword to text), which carry `Thumb::URI` and
    /// `Thumb::MTime`.
    static func textChunks(_ png: [UInt8]) -> [String: String] {
        var found: [String: String] = [:]
        var offset = 8
        while offset + 8 <= png.count {
            let length = png[offset..<offset + 4].reduce(0) { $0 << 8 | Int($1) }
            let type = String(decoding: png[offset + 4..<offset + 8], as: UTF8.self)
            let start = offset + 8
            guard length >= 0, start + length <= png.count else { break }
            if type == "tEXt", let split = png[start..<start + length].firstIndex(of: 0) {
                found[String(decoding: png[start..<split], as: UTF8.self)] = String(
                    decoding: png[(split + 1)..<(start + length)], as: UTF8.self)
            }
            if type == "IEND" { break }
            offset = start + length + 4
        }
        return found
    }
}
