import Glibc
import HostText
import Policy
import Synchronization
import SystemPackage

/// The items inside folder documents (a folder exported with AddFull's
/// export-directory flag, or picked in directory mode): each name the
/// layout has shown below `DOC_ID/NAME` of a view gets a number, kept
/// while the kernel holds it (its lookups not yet forgotten).
///
/// Leaf lock: no syscall while it is held.
final class DocumentFolderNodes: Sendable {
    struct Place: Hashable, Sendable {
        var documentID: String
        /// The view: an app's `by-app/APP`, or nil for the owner's `DOC_ID`.
        var app: AppID?
        /// The path below the folder document, never empty.
        var path: String
    }

    private struct State {
        var next: UInt64 = 1
        var places: [UInt64: (place: Place, lookups: UInt64)] = [:]
        var numbers: [Place: UInt64] = [:]
    }

    private let state = Mutex(State())

    /// The number of `place`, made when new; one more lookup the kernel holds.
    func lookedUp(_ place: Place) -> UInt64 {
        state.withLock { state in
            let number: UInt64
            if let known = state.numbers[place] {
                number = known
            } else {
                number = state.next
                state.next += 1
                state.numbers[place] = number
            }
            state.places[number, default: (place, 0)].lookups += 1
            return number
        }
    }

    /// The number `place` has, if the kernel holds it (no lookup taken).
    func number(of place: Place) -> UInt64? { state.withLock { $0.numbers[place] } }

    func place(_ number: UInt64) -> Place? { state.withLock { $0.places[number]?.place } }

    func forgot(_ number: UInt64, count: UInt64) {
        state.withLock { state in
            guard let held = state.places[number] else { return }
            if held.lookups <= count {
                state.places[number] = nil
                if state.numbers[held.place] == number { state.numbers[held.place] = nil }
            } else {
                state.places[number]?.lookups -= count
            }
        }
    }

    /// A rename: `from` and everything below it now live at `to`.
    func renamed(_ from: Place, to: Place) {
        state.withLock { state in
            for (number, held) in state.places
            where held.place.documentID == from.documentID && held.place.app == from.app {
                let path = held.place.path
                guard path == from.path || path.hasPrefix(from.path + "/") else { continue }
                var moved = held.place
                moved.path = to.path + path.dropFirst(from.path.count)
                if state.numbers[held.place] == number { state.numbers[held.place] = nil }
                state.places[number]?.place = moved
                state.numbers[moved] = number
            }
        }
    }
}

/// Host access below a folder document: every component is opened with
/// O_NOFOLLOW from the document's own folder, so a symbolic link inside
/// it never leads the layout out of it (SPEC S33).
enum FolderWalk {
    /// O_PATH, which Glibc exports to Swift under its inner name only.
    static let pathOnly: Int32 = __O_PATH

    /// The folder at `path` below `root` ("" for the root itself), open as
    /// O_PATH|O_DIRECTORY; the caller closes it.
    static func folder(_ root: String, _ path: String) throws(Errno) -> Int32 {
        var descriptor = root.withHostCString { open($0, Self.pathOnly | O_DIRECTORY | O_CLOEXEC) }
        guard descriptor >= 0 else { throw Errno(rawValue: errno) }
        for component in path.split(separator: "/") where !component.isEmpty {
            let next = String(component).withHostCString {
                openat(descriptor, $0, Self.pathOnly | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            }
            let failure = errno
            close(descriptor)
            guard next >= 0 else { throw Errno(rawValue: failure == ELOOP ? ENOTDIR : failure) }
            descriptor = next
        }
        return descriptor
    }

    /// The folder holding `path` (open, closed by the caller) and its last name.
    static func parent(_ root: String, _ path: String) throws(Errno) -> (Int32, String) {
        let components = path.split(separator: "/").map(String.init)
        guard let name = components.last else { throw Errno.invalidArgument }
        return (try folder(root, components.dropLast().joined(separator: "/")), name)
    }

    /// The inode number the layout shows for a host file below a folder
    /// document: the host's own (its device folded in), so that hard
    /// links show as one file, as on the host; a kind of its own (8 in
    /// the top byte) keeps it apart from the layout's node numbers.
    static func shownInode(device: UInt64, hostInode: UInt64) -> UInt64 {
        8 << 56 | ((hostInode ^ (device &* 0x9E37_79B9_7F4A_7C15)) & 0x00ff_ffff_ffff_ffff)
    }

    /// lstat of `path` below `root`.
    static func status(_ root: String, _ path: String) throws(Errno) -> stat {
        if path.isEmpty {
            var status = stat()
            guard root.withHostCString({ stat($0, &status) }) == 0 else { throw Errno(rawValue: errno) }
            return status
        }
        let (folder, name) = try parent(root, path)
        defer { close(folder) }
        var status = stat()
        guard name.withHostCString({ fstatat(folder, $0, &status, AT_SYMLINK_NOFOLLOW) }) == 0 else {
            throw Errno(rawValue: errno)
        }
        return status
    }

    /// The names in the folder at `path` below `root`, with each one's
    /// type (S_IFDIR, S_IFLNK or S_IFREG for anything else) and host inode.
    static func names(_ root: String, _ path: String) throws(Errno) -> [(
        name: String, type: mode_t, hostInode: UInt64
    )] {
        let folder = try folder(root, path)
        let readable = openat(folder, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        close(folder)
        guard readable >= 0, let stream = fdopendir(readable) else {
            let failure = errno
            if readable >= 0 { close(readable) }
            throw Errno(rawValue: failure)
        }
        defer { closedir(stream) }
        var found: [(String, mode_t, UInt64)] = []
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) {
                HostName.string(cString: $0.bindMemory(to: CChar.self).baseAddress!)
            }
            if name == "." || name == ".." { continue }
            let type: mode_t =
                switch Int32(entry.pointee.d_type) {
                case Int32(DT_DIR): S_IFDIR
                case Int32(DT_LNK): S_IFLNK
                default: S_IFREG
                }
            found.append((name, type, UInt64(entry.pointee.d_ino)))
        }
        return found.sorted { $0.0 < $1.0 }
    }
}
