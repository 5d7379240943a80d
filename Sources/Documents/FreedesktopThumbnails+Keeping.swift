import CZlib
import Foundation
import Glibc
import HostText

/// Previews the daemon keeps in the owner's cache for the owner's file
/// manager (SPEC S50): a dataless document of an extension's provider,
/// seen through the mount, shows its preview in Nautilus or Dolphin
/// without a download, because the cache already holds one for its URI,
/// as the Thumbnail Managing Standard has file managers look it up
/// (`large/MD5(URI).png`, with `Thumb::URI` and `Thumb::MTime`).
extension FreedesktopThumbnails {
    /// Whether the cache holds a preview of `path` made for the file as
    /// it is now (`mtime`, seconds).
    public func isKept(forPath path: String, mtime: Int) -> Bool {
        guard let data = FileManager.default.contents(atPath: "\(cache)/large/\(Self.cacheName(of: path))") else {
            return false
        }
        return Self.textChunks([UInt8](data))["Thumb::MTime"] == String(mtime)
    }

    /// Keeps `png` as the preview of the file at `path` (absolute, the
    /// mount's) whose modification time is `mtime`: the standard's two
    /// chunks go first after the header, any the PNG carried are dropped.
    /// Written 0600 beside its final name and renamed over it, so a file
    /// manager never reads half a preview.
    public func keep(_ png: [UInt8], forPath path: String, mtime: Int) throws {
        guard let marked = Self.marked(png, uri: Self.uri(of: path), mtime: mtime) else {
            throw CocoaError(.fileReadCorruptFile)
        }
        let folder = cache + "/large"
        try FileManager.default.createDirectory(
            atPath: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let final = folder + "/" + Self.cacheName(of: path)
        let temporary = final + ".scopefs-\(getpid())"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard descriptor >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        let written = marked.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        close(descriptor)
        guard written == marked.count, rename(temporary, final) == 0 else {
            unlink(temporary)
            throw POSIXError(.EIO)
        }
    }

    /// `png` with `Thumb::URI` and `Thumb::MTime` after its IHDR chunk and
    /// without tEXt chunks of its own that name either; nil when it is no
    /// PNG this can read.
    static func marked(_ png: [UInt8], uri: String, mtime: Int) -> [UInt8]? {
        guard png.starts(with: ThumbnailLimits.pngSignature) else { return nil }
        var out = Array(png[0..<8])
        var offset = 8
        var sawHeader = false
        while offset + 12 <= png.count {
            let length = png[offset..<offset + 4].reduce(0) { $0 << 8 | Int($1) }
            let end = offset + 12 + length
            guard end <= png.count else { return nil }
            let type = String(decoding: png[offset + 4..<offset + 8], as: UTF8.self)
            let data = png[offset + 8..<offset + 8 + length]
            let ownThumbText = type == "tEXt" && data.starts(with: Array("Thumb::".utf8))
            if !ownThumbText { out += png[offset..<end] }
            if type == "IHDR" {
                sawHeader = true
                out += chunk("tEXt", Array("Thumb::URI".utf8) + [0] + Array(uri.utf8))
                out += chunk("tEXt", Array("Thumb::MTime".utf8) + [0] + Array(String(mtime).utf8))
            }
            offset = end
            if type == "IEND" { return sawHeader ? out : nil }
        }
        return nil
    }

    /// One PNG chunk: length, type, data, and the CRC-32 of type and data.
    private static func chunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
        let body = Array(type.utf8) + data
        let crc = body.withUnsafeBufferPointer { UInt32(crc32(0, $0.baseAddress, uInt($0.count))) }
        return bigEndian(UInt32(data.count)) + body + bigEndian(crc)
    }

    private static func bigEndian(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
    }
}
