import Foundation
import Glibc
import Synchronization

/// The staging folder the extension writes `fetch` results in, and the
/// "received" folder the host moves each checked file to before handing
/// it over. The extension can write in staging (and in its sandbox sees
/// nothing else of the cache); it could swap a checked file for a symlink
/// between the check and the caller's rename, so the host first takes the
/// file out of its reach (a rename into `received`, a sibling the sandbox
/// does not show) and checks it again there, by inode.
final class StagedFiles: Sendable {
    let staging: String
    let received: String
    private let stagingDescriptor: Int32
    private let receivedDescriptor: Int32
    private let resolvedStaging: String
    /// Names handed out, for the next unique one.
    private let taken = Atomic<UInt64>(0)

    init(staging: String, received: String) throws(SpawnError) {
        self.staging = staging
        self.received = received
        for folder in [staging, received] where mkdir(folder, 0o700) != 0 && errno != EEXIST {
            throw SpawnError("\(folder): \(String(cString: strerror(errno)))")
        }
        guard let resolved = Self.realPath(staging) else { throw SpawnError("\(staging): cannot be resolved") }
        resolvedStaging = resolved
        stagingDescriptor = open(staging, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW)
        receivedDescriptor = open(received, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW)
        guard stagingDescriptor >= 0, receivedDescriptor >= 0 else {
            throw SpawnError("staging folders: \(String(cString: strerror(errno)))")
        }
    }

    deinit {
        close(stagingDescriptor)
        close(receivedDescriptor)
    }

    /// Empties a folder (an extension's leftovers before it starts again;
    /// the received folder when the host starts). Symlinks are removed,
    /// never followed.
    static func empty(_ folder: String) {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
        for entry in entries { try? FileManager.default.removeItem(atPath: folder + "/" + entry) }
    }

    /// Checks the file `answer` names and moves it to `received`: a
    /// regular file of link count 1 and size `answer.length`, directly in
    /// the staging folder (its folder resolved with realpath).
    func take(_ answer: FetchedFile) throws(AnswerRefusal) -> FetchedFile {
        let name = try nameInStaging(answer.path)
        let before = try check(stagingDescriptor, name, length: answer.length, removeOnFailure: true)
        let newName = uniqueName()
        guard renameat(stagingDescriptor, name, receivedDescriptor, newName) == 0 else {
            let reason = String(cString: strerror(errno))
            _ = unlinkat(stagingDescriptor, name, 0)
            throw AnswerRefusal("cannot move it out of staging: \(reason)")
        }
        do throws(AnswerRefusal) {
            let after = try check(receivedDescriptor, newName, length: answer.length, removeOnFailure: false)
            guard after.st_dev == before.st_dev, after.st_ino == before.st_ino else {
                throw AnswerRefusal("replaced while it was checked")
            }
        } catch {
            // Whatever was swapped in: unlinked, or a folder handed back.
            if unlinkat(receivedDescriptor, newName, 0) != 0 {
                _ = renameat(receivedDescriptor, newName, stagingDescriptor, name)
            }
            throw error
        }
        var file = answer
        file.path = received + "/" + newName
        return file
    }

    /// A staged file still being written (a fetch's `$/progress` names
    /// it), opened for reading if it is a regular file of one link directly
    /// in the staging folder; nil otherwise. Never blocks (a FIFO), never
    /// follows a symlink.
    func openPrefix(_ path: String) -> Int32? {
        guard let name = try? nameInStaging(path) else { return nil }
        let descriptor = openat(stagingDescriptor, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)
        guard descriptor >= 0 else { return nil }
        var status = stat()
        guard fstat(descriptor, &status) == 0, status.st_mode & S_IFMT == S_IFREG, status.st_nlink == 1 else {
            close(descriptor)
            return nil
        }
        return descriptor
    }

    /// Removes a staged file nobody will take (the answer to a call its
    /// caller gave up on), if it is directly in the staging folder.
    func discard(_ path: String) {
        guard let name = try? nameInStaging(path) else { return }
        _ = unlinkat(stagingDescriptor, name, 0)
    }

    private func nameInStaging(_ path: String) throws(AnswerRefusal) -> String {
        guard path.hasPrefix("/"), !path.utf8.contains(0) else { throw AnswerRefusal("not an absolute path") }
        let folder = (path as NSString).deletingLastPathComponent
        let name = (path as NSString).lastPathComponent
        guard !name.isEmpty, name != ".", name != "..", !path.hasSuffix("/") else {
            throw AnswerRefusal("not a file name")
        }
        guard Self.realPath(folder) == resolvedStaging else {
            throw AnswerRefusal("not directly inside the staging folder \(staging)")
        }
        return name
    }

    private func check(_ folder: Int32, _ name: String, length: Int64, removeOnFailure: Bool) throws(AnswerRefusal)
        -> stat
    {
        var status = stat()
        guard fstatat(folder, name, &status, AT_SYMLINK_NOFOLLOW) == 0 else {
            throw AnswerRefusal(String(cString: strerror(errno)))
        }
        var problem: String?
        if status.st_mode & S_IFMT == S_IFLNK {
            problem = "a symbolic link"
        } else if status.st_mode & S_IFMT != S_IFREG {
            problem = "not a regular file"
        } else if status.st_nlink != 1 {
            problem = "\(status.st_nlink) links (a hard link to another file)"
        } else if status.st_size != length {
            problem = "\(status.st_size) bytes where the answer says \(length)"
        }
        guard let problem else { return status }
        if removeOnFailure && status.st_mode & S_IFMT != S_IFDIR { _ = unlinkat(folder, name, 0) }
        throw AnswerRefusal(problem)
    }

    private func uniqueName() -> String {
        let number = taken.wrappingAdd(1, ordering: .relaxed).newValue
        return "fetched-\(getpid())-\(number)-\(UInt32.random(in: 0...UInt32.max))"
    }

    static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }
}
