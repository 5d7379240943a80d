import Foundation
import Glibc

/// The folders an ELF program asks the loader to search for its shared
/// libraries (DT_RUNPATH, else DT_RPATH), with `$ORIGIN` filled in. The
/// sandbox shows those outside the system directories read-only, so a
/// program built against a toolchain under /opt (a Swift app and its
/// runtime, issue 31) runs whatever build of scopefs starts it. Read from
/// the file through its program headers: nothing of the program runs
/// (unlike `ldd`), and only a few kilobytes are read.
package enum ElfRunPath {
    package static func folders(of path: String) -> [String] {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return [] }
        defer { close(descriptor) }
        let file = ElfFile(descriptor: descriptor)
        guard let text = file.runPath() else { return [] }
        let origin = (path as NSString).deletingLastPathComponent
        return text.split(separator: ":").map {
            $0.replacingOccurrences(of: "${ORIGIN}", with: origin).replacingOccurrences(of: "$ORIGIN", with: origin)
        }
        .filter { $0.hasPrefix("/") }
    }
}

/// A 64-bit little-endian ELF file, read with pread: the kind this
/// machine runs; anything else has no run path here.
private struct ElfFile {
    package let descriptor: Int32

    private func read(_ count: Int, at offset: Int) -> [UInt8]? {
        guard offset >= 0, count > 0, count <= 1 << 20 else { return nil }
        var buffer = [UInt8](repeating: 0, count: count)
        let got = buffer.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, count, off_t(offset)) }
        return got == count ? buffer : nil
    }

    private func word(_ bytes: [UInt8], _ at: Int, _ size: Int) -> Int {
        var value: UInt64 = 0
        for index in (0..<size).reversed() { value = value << 8 | UInt64(bytes[at + index]) }
        return Int(truncatingIfNeeded: value)
    }

    package func runPath() -> String? {
        guard let header = read(64, at: 0), header[0...3] == [0x7F, 0x45, 0x4C, 0x46], header[4] == 2, header[5] == 1
        else { return nil }
        let (tableOffset, entrySize, count) = (word(header, 0x20, 8), word(header, 0x36, 2), word(header, 0x38, 2))
        guard entrySize >= 56, count > 0, let table = read(entrySize * count, at: tableOffset) else { return nil }
        struct Segment { var type, offset, address, size: Int }
        let segments = (0..<count).map { index -> Segment in
            let at = index * entrySize
            return Segment(
                type: word(table, at, 4), offset: word(table, at + 8, 8), address: word(table, at + 16, 8),
                size: word(table, at + 32, 8))
        }
        let PT_LOAD = 1
        let PT_DYNAMIC = 2
        guard let dynamic = segments.first(where: { $0.type == PT_DYNAMIC }),
            let entries = read(min(dynamic.size, 1 << 16), at: dynamic.offset)
        else { return nil }
        var stringTable: Int?
        var runPath: Int?
        var rPath: Int?
        for at in stride(from: 0, to: entries.count - 15, by: 16) {
            let (tag, value) = (word(entries, at, 8), word(entries, at + 8, 8))
            if tag == 0 { break }
            if tag == 5 { stringTable = value }  // DT_STRTAB, an address
            if tag == 29 { runPath = value }  // DT_RUNPATH, an offset in it
            if tag == 15 { rPath = value }  // DT_RPATH
        }
        guard let address = stringTable, let at = runPath ?? rPath,
            let load = segments.first(where: {
                $0.type == PT_LOAD && $0.address <= address && address < $0.address + $0.size
            }),
            let bytes = read(4096, at: address - load.address + load.offset + at)
                ?? read(256, at: address - load.address + load.offset + at),
            let end = bytes.firstIndex(of: 0)
        else { return nil }
        return String(decoding: bytes[..<end], as: UTF8.self)
    }
}
