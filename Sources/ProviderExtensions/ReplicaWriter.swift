import Foundation
import Glibc
import Synchronization

/// The changes the replica makes to its folder when the remote changed:
/// new placeholders, reset content, moves, removals, conflict copies.
///
/// In the daemon these run in a child process (`ReplicaWriterProcess`):
/// the host-change channel takes the daemon's own changes for changes made
/// through the mount, which the kernel already knows in that view, while
/// a remote change is news to every view and to presenters. Made by
/// another process, it is a host change like any other, and reaches the
/// kernel's caches and presenters the way a change on a local provider
/// does (SPEC S37, issue 32's "remote changes"). Downloads are not
/// changes: the daemon writes those itself.
public protocol ReplicaWriting: Sendable {
    func placeholder(_ path: String, size: Int64, mtime: Double, mode: UInt32) throws(ReplicaFolder.Failure) -> UInt64
    func reset(_ path: String, inode: UInt64, size: Int64, mtime: Double, mode: UInt32) throws(ReplicaFolder.Failure)
    func setAttributes(_ path: String, mtime: Double, mode: UInt32) throws(ReplicaFolder.Failure)
    func makeFolder(_ path: String, mode: UInt32, mtime: Double) throws(ReplicaFolder.Failure) -> UInt64
    func makeSymlink(_ path: String, target: String) throws(ReplicaFolder.Failure) -> UInt64
    func rename(_ from: String, to: String) throws(ReplicaFolder.Failure)
    func remove(_ path: String) throws(ReplicaFolder.Failure)
    func copy(_ from: String, to: String) throws(ReplicaFolder.Failure) -> UInt64
}

extension ReplicaFolder: ReplicaWriting {}

/// `scopefs replica-writer ROOT`'s loop: one JSON request per line on
/// stdin, one answer per line on stdout (`{"inode": N}`, `{}` or
/// `{"errno": E, "message": M}`), until end of file.
public enum ReplicaWriterServer {
    public static func serve(root: String) -> Int32 {
        let folder = ReplicaFolder(root: root)
        while let line = readLine(strippingNewline: true) {
            let answer: [String: Any]
            do {
                guard let request = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
                    throw ReplicaFolder.Failure.system(EINVAL, "not a request")
                }
                answer = try perform(request, on: folder)
            } catch let ReplicaFolder.Failure.system(code, message) {
                answer = ["errno": Int(code), "message": message]
            } catch {
                answer = ["errno": Int(EINVAL), "message": "\(error)"]
            }
            let data = (try? JSONSerialization.data(withJSONObject: answer)) ?? Data("{}".utf8)
            FileHandle.standardOutput.write(data + Data("\n".utf8))
        }
        return 0
    }

    private static func perform(_ request: [String: Any], on folder: ReplicaFolder) throws -> [String: Any] {
        let path = request["path"] as? String ?? ""
        let mtime = request["mtime"] as? Double ?? 0
        let mode = UInt32(request["mode"] as? Int ?? 0o644)
        let size = Int64(request["size"] as? Int ?? 0)
        switch request["op"] as? String {
        case "placeholder": return ["inode": try folder.placeholder(path, size: size, mtime: mtime, mode: mode)]
        case "reset":
            let inode = UInt64(truncatingIfNeeded: request["inode"] as? Int ?? 0)
            try folder.reset(path, inode: inode, size: size, mtime: mtime, mode: mode)
        case "attributes": try folder.setAttributes(path, mtime: mtime, mode: mode)
        case "folder": return ["inode": try folder.makeFolder(path, mode: mode, mtime: mtime)]
        case "symlink": return ["inode": try folder.makeSymlink(path, target: request["target"] as? String ?? "")]
        case "rename": try folder.rename(path, to: request["to"] as? String ?? "")
        case "remove": try folder.remove(path)
        case "copy": return ["inode": try folder.copy(path, to: request["to"] as? String ?? "")]
        default: throw ReplicaFolder.Failure.system(EINVAL, "unknown operation")
        }
        return [:]
    }
}

/// The client of a `scopefs replica-writer` child (see `ReplicaWriting`).
/// One request at a time; a child that died is started again.
public final class ReplicaWriterProcess: ReplicaWriting, Sendable {
    private let executable: String
    private let root: String

    /// The child and its pipes, one request at a time.
    private struct Child {
        var process: Process?
        var input: FileHandle?
        var output: FileHandle?
        var buffer = Data()
    }

    private let child = Mutex(Child())

    /// `executable`: the scopefs binary (the daemon's own, /proc/self/exe).
    public init(executable: String, root: String) {
        self.executable = executable
        self.root = root
    }

    deinit { stop() }

    public func stop() {
        child.withLock { child in
            try? child.input?.close()
            child.process?.waitUntilExit()
            child.process = nil
        }
    }

    public func placeholder(_ path: String, size: Int64, mtime: Double, mode: UInt32) throws(ReplicaFolder.Failure)
        -> UInt64
    {
        try inode(["op": "placeholder", "path": path, "size": size, "mtime": mtime, "mode": Int(mode)])
    }
    public func reset(_ path: String, inode: UInt64, size: Int64, mtime: Double, mode: UInt32)
        throws(ReplicaFolder.Failure)
    {
        _ = try call([
            "op": "reset", "path": path, "inode": Int(truncatingIfNeeded: inode), "size": size, "mtime": mtime,
            "mode": Int(mode),
        ])
    }
    public func setAttributes(_ path: String, mtime: Double, mode: UInt32) throws(ReplicaFolder.Failure) {
        _ = try call(["op": "attributes", "path": path, "mtime": mtime, "mode": Int(mode)])
    }
    public func makeFolder(_ path: String, mode: UInt32, mtime: Double) throws(ReplicaFolder.Failure) -> UInt64 {
        try inode(["op": "folder", "path": path, "mtime": mtime, "mode": Int(mode)])
    }
    public func makeSymlink(_ path: String, target: String) throws(ReplicaFolder.Failure) -> UInt64 {
        try inode(["op": "symlink", "path": path, "target": target])
    }
    public func rename(_ from: String, to: String) throws(ReplicaFolder.Failure) {
        _ = try call(["op": "rename", "path": from, "to": to])
    }
    public func remove(_ path: String) throws(ReplicaFolder.Failure) { _ = try call(["op": "remove", "path": path]) }
    public func copy(_ from: String, to: String) throws(ReplicaFolder.Failure) -> UInt64 {
        try inode(["op": "copy", "path": from, "to": to])
    }

    private func inode(_ request: [String: Any]) throws(ReplicaFolder.Failure) -> UInt64 {
        guard let inode = try call(request)["inode"] as? Int else { throw .system(EIO, "the replica writer failed") }
        return UInt64(inode)
    }

    private func call(_ request: [String: Any]) throws(ReplicaFolder.Failure) -> [String: Any] {
        guard let body = try? JSONSerialization.data(withJSONObject: request) else {
            throw .system(EINVAL, "the replica writer's request cannot be written")
        }
        // The answer's line leaves the lock as bytes (Sendable); it is read after.
        let line: Data? = child.withLock { child in
            for _ in 0..<2 {
                if let line = try? exchange(body, &child) { return line }
                child.process?.terminate()
                child.process = nil
            }
            return nil
        }
        guard let line, let answer = (try? JSONSerialization.jsonObject(with: line)) as? [String: Any] else {
            throw .system(EIO, "the replica writer does not answer")
        }
        if let code = answer["errno"] as? Int {
            throw .system(Int32(code), answer["message"] as? String ?? "replica writer error")
        }
        return answer
    }

    /// Sends one request line and returns the answer's line.
    private func exchange(_ body: Data, _ child: inout Child) throws -> Data {
        if child.process == nil || child.process?.isRunning != true { try launch(&child) }
        guard let input = child.input, let output = child.output else {
            throw ReplicaFolder.Failure.system(EIO, "no replica writer")
        }
        try input.write(contentsOf: body + Data("\n".utf8))
        while true {
            if let newline = child.buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = Data(child.buffer[child.buffer.startIndex..<newline])
                child.buffer = Data(child.buffer[(newline + 1)...])
                return line
            }
            // What is there: `read(upToCount:)` would wait for the whole count.
            let more = output.availableData
            guard !more.isEmpty else { throw ReplicaFolder.Failure.system(EIO, "the replica writer exited") }
            child.buffer += more
        }
    }

    private func launch(_ child: inout Child) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = ["replica-writer", root]
        let stdin = Pipe()
        let stdout = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        try process.run()
        child = Child(process: process, input: stdin.fileHandleForWriting, output: stdout.fileHandleForReading)
    }
}
