import CSystemShims
import FuseBridge
import Glibc
import SystemPackage

/// SEEK_DATA and SEEK_HOLE (SPEC S42): a placeholder's missing bytes are
/// holes, so that `tar --sparse`, `cp --sparse` and backup tools skip
/// them without downloading (Apple's dataless files read as holes to
/// `lseek` too). Other files answer as their backing file does.
extension ScopeFileSystem {
    public func lseek(_ request: Request, inode: UInt64, handle: UInt64, offset: Int64, whence: Int32)
        throws(Errno) -> Int64
    {
        let open = OpenHandle.from(handle)
        try checkUser(open, request, .read)
        try checkStillGranted(open, .read, request)
        guard whence == scopefs_seek_data || whence == scopefs_seek_hole else { throw .invalidArgument }
        if let (content, file) = content(of: open.node), let data = content.dataRanges(file) {
            let size = Int64(try Sys.stat(open.descriptor).st_size)
            return try Self.seek(in: data, size: size, from: offset, toData: whence == scopefs_seek_data)
        }
        return try Sys.seek(open.descriptor, offset, whence)
    }

    /// lseek(2)'s answer for a file of `size` bytes whose data is `data`
    /// (sorted, disjoint): ENXIO at or past the end, or for SEEK_DATA past
    /// the last data; the end of the file is a hole.
    static func seek(in data: [Range<Int64>], size: Int64, from offset: Int64, toData: Bool) throws(Errno) -> Int64 {
        guard offset >= 0 else { throw .invalidArgument }
        guard offset < size else { throw .noSuchAddressOrDevice }
        if toData {
            guard let next = data.first(where: { $0.upperBound > offset && $0.lowerBound < size }) else {
                throw .noSuchAddressOrDevice
            }
            return max(next.lowerBound, offset)
        }
        guard let within = data.first(where: { $0.contains(offset) }) else { return offset }
        return min(within.upperBound, size)
    }
}
