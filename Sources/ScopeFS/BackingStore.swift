import Glibc
import Policy
import SystemPackage

/// The rules ScopeFileSystem follows on the backing store, on top of the
/// raw wrappers of `Sys`: which flags reach the host, how an entry is
/// opened without following a swapped symlink (SPEC S33), where an
/// extended-attribute call is aimed, which set-id bits a write clears.
/// Each takes descriptors and names only, so ScopeFSTests checks it
/// against a temporary directory, without a mount.
enum BackingStore {
    /// Whether an open asks to change the file (a write or a truncation).
    static func opensForWriting(_ flags: Int32) -> Bool {
        (flags & O_ACCMODE) != O_RDONLY || flags & O_TRUNC != 0
    }

    /// What a descriptor opened with `flags` is for: every operation on it
    /// asks the access rule for all of it (SPEC S47).
    static func descriptorAccess(_ flags: Int32) -> DescriptorAccess {
        var access: DescriptorAccess = []
        if flags & O_ACCMODE != O_WRONLY { access.insert(.read) }
        if opensForWriting(flags) { access.insert(.write) }
        return access
    }

    /// Flags for the backing open. O_DIRECT is dropped: libfuse 3.14 hands
    /// the daemon misaligned buffers, so a passed-through O_DIRECT write fails
    /// with EINVAL (the kernel still bypasses its own cache for the caller).
    static func backingFlags(_ flags: Int32) -> Int32 {
        flags & ~(O_CREAT | O_EXCL | O_NOCTTY | Sys.direct | O_CLOEXEC)
    }

    /// Opens the existing entry `name` of `parent` with an app's open
    /// flags; a symlink swapped in for it fails with ELOOP, never followed.
    static func openEntry(_ parent: Int32, _ name: String, flags: Int32) throws(Errno) -> Int32 {
        try Sys.openAt(parent, name, backingFlags(flags) | O_NOFOLLOW)
    }

    /// Creates (or opens, without O_EXCL) `name` in `directory`; a symlink
    /// there is not followed either.
    static func createEntry(_ directory: Int32, _ name: String, flags: Int32, mode: mode_t) throws(Errno) -> Int32 {
        try Sys.openAt(directory, name, backingFlags(flags) | O_CREAT | O_NOFOLLOW, mode)
    }

    /// Creates `name` in `directory`, failing with EEXIST when the host has
    /// it: for a name the app cannot see (a temporary of a save, SPEC S48),
    /// where the kernel's own O_EXCL check knows nothing of the host's.
    static func createNewEntry(_ directory: Int32, _ name: String, flags: Int32, mode: mode_t) throws(Errno) -> Int32 {
        try Sys.openAt(directory, name, backingFlags(flags) | O_CREAT | O_EXCL | O_NOFOLLOW, mode)
    }

    /// Where an extended-attribute call on a node is aimed: a folder's own
    /// descriptor (followed to the folder), or its parent's descriptor plus
    /// its name (a final symlink not followed); see `Sys.XattrPath`.
    static func xattrPath(directory: Int32?, parent: Int32?, name: String) throws(Errno) -> Sys.XattrPath {
        if let directory { return .folder(directory) }
        guard let parent else { throw .staleNFSFileHandle }
        return .entry(parent: parent, name: name)
    }

    /// The permission bits a regular file keeps when a caller without
    /// CAP_FSETID writes or truncates it, or nil when nothing changes: the
    /// setuid bit goes; the setgid bit too when the group may execute or
    /// the caller is not in the file's group (the VFS rule).
    static func modeAfterUnprivilegedWrite(_ mode: mode_t, callerInGroup: Bool) -> mode_t? {
        guard mode & S_IFMT == S_IFREG else { return nil }
        var kept = mode & 0o7777 & ~S_ISUID
        if mode & S_ISGID != 0, mode & S_IXGRP != 0 || !callerInGroup { kept &= ~S_ISGID }
        return kept != mode & 0o7777 ? kept : nil
    }

    /// Clears the set-id bits of the file open as `descriptor`, as the
    /// kernel would for the caller (`modeAfterUnprivilegedWrite`).
    /// `known`: the file's status, when it was just read.
    static func clearSetIDBits(_ descriptor: Int32, known: stat? = nil, isMember: (gid_t) -> Bool) throws(Errno) {
        let info: stat
        if let known { info = known } else { info = try Sys.stat(descriptor) }
        if let kept = modeAfterUnprivilegedWrite(info.st_mode, callerInGroup: isMember(info.st_gid)) {
            try Sys.chmod(descriptor, kept)
        }
    }
}
