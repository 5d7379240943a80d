import Foundation
import Glibc
import Policy
import Synchronization

/// Attribution the kernel keeps (SPEC S5): every `scopefs run` gets a cgroup
/// v2 of its own, made by the daemon under the daemon's own cgroup, and the
/// registering process is moved into it. A process inherits its parent's
/// cgroup atomically at fork and clone, whatever the flags (CLONE_PARENT
/// included), and keeps it across setsid, reparenting and exec; only a write
/// to a `cgroup.procs` file moves it, and the sandbox shows no cgroup file
/// system at all. So "which app is this request from" is the cgroup of the
/// caller, read once from `/proc/TID/cgroup` on a cache miss.
///
/// Hybrid machines (cgroup v1 controllers with v2 at
/// `/sys/fs/cgroup/unified`) work the same: ScopeFS enables no controller,
/// it only groups.
package final class AppCgroups: Sendable {
    /// Where the cgroup2 file system is mounted, e.g. `/sys/fs/cgroup`.
    package let mountPath: String
    /// The daemon's own cgroup, relative to the hierarchy's root ("" for "/").
    package let base: String
    /// Leaf names start with this, so the CLI can tell an app process by its
    /// own `/proc/self/cgroup` (`OwnerCheck`).
    package static let leafPrefix = "scopefs-run-"
    /// The runs' leaves: their app, and whether a process was placed in
    /// it yet (an unplaced leaf is empty because it is new, not finished).
    private let runs = Mutex<[String: (app: AppID, placed: Bool)]>([:])
    private let counter = Atomic<UInt64>(0)

    /// nil when there is no writable cgroup2 hierarchy (no cgroup2 mount, or
    /// no permission): the tracker then follows fork events instead.
    package init?() {
        guard let mountPath = MountTable.firstMount(ofType: "cgroup2"), let own = ProcFS.cgroup2Path(of: "self") else {
            return nil
        }
        self.mountPath = mountPath
        // Runs are grouped below the daemon's own cgroup, which it may write
        // to (root, or a cgroup delegated to the owner).
        self.base = own == "/" ? "" : own
        let probe = mountPath + base + "/\(Self.leafPrefix)\(getpid())-probe"
        guard mkdir(probe, 0o755) == 0 || errno == EEXIST else { return nil }
        rmdir(probe)
        removeAbandoned()
    }

    /// Removes the empty run cgroups of daemons that are gone (killed before
    /// they could clean up): their names carry the daemon's pid.
    private func removeAbandoned() {
        let directory = mountPath + base
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return }
        for entry in entries where entry.hasPrefix(Self.leafPrefix) {
            let owner = entry.dropFirst(Self.leafPrefix.count).prefix { $0 != "-" }
            guard let pid = Int32(owner), pid != getpid(), kill(pid, 0) != 0, errno == ESRCH else { continue }
            rmdir(directory + "/" + entry)
        }
    }

    /// Makes a cgroup for one run of `app` and moves `pid` into it; the
    /// leaf's name, nil when either failed.
    package func place(pid: Int32, app: AppID) -> String? {
        let number = counter.add(1, ordering: .relaxed).newValue
        let leaf = "\(Self.leafPrefix)\(getpid())-\(number)"
        let directory = mountPath + base + "/" + leaf
        guard mkdir(directory, 0o755) == 0 else { return nil }
        runs.withLock { $0[leaf] = (app, false) }
        guard Self.write("\(pid)\n", to: directory + "/cgroup.procs") else {
            runs.withLock { $0[leaf] = nil }
            rmdir(directory)
            return nil
        }
        runs.withLock { $0[leaf]?.placed = true }
        return leaf
    }

    /// The app whose run's cgroup holds the thread `tid` (or a cgroup below
    /// it), nil for every other process.
    package func app(of tid: Int32) -> AppID? {
        guard let path = ProcFS.cgroup2Path(of: "\(tid)") else { return nil }
        return app(ofCgroup: path)
    }

    package func app(ofCgroup path: String) -> AppID? {
        guard let leaf = Self.runLeaf(in: path, base: base) else { return nil }
        return runs.withLock { $0[leaf]?.app }
    }

    /// The first path component below `base` when it names a run.
    package static func runLeaf(in path: String, base: String) -> String? {
        let prefix = base + "/"
        guard path.hasPrefix(prefix) else { return nil }
        let leaf = path.dropFirst(prefix.count).prefix { $0 != "/" }
        return leaf.hasPrefix(leafPrefix) ? String(leaf) : nil
    }

    /// Removes the cgroups of runs whose processes have all ended (rmdir
    /// refuses a populated cgroup, so this never cuts a live run; a leaf
    /// being made for a run that registers meanwhile is left alone).
    /// Returns the leaves removed.
    @discardableResult
    package func removeEmpty() -> [String] {
        let leaves = runs.withLock { $0.filter { $0.value.placed }.map(\.key) }
        var removed: [String] = []
        for leaf in leaves where rmdir(mountPath + base + "/" + leaf) == 0 {
            runs.withLock { $0[leaf] = nil }
            removed.append(leaf)
        }
        return removed
    }

    /// Takes over the leaf of a run that a previous daemon made (see
    /// `StrandedRuns`): its processes stay attributed to `app`.
    package func adopt(leaf: String, app: AppID) {
        guard leaf.hasPrefix(Self.leafPrefix) else { return }
        runs.withLock { $0[leaf] = (app, true) }
    }

    /// The processes in a run's leaf (and below it); nil when it is gone.
    package func processes(inLeaf leaf: String) -> [Int32]? {
        guard leaf.hasPrefix(Self.leafPrefix), !leaf.contains("/") else { return nil }
        let directory = mountPath + base + "/" + leaf
        guard FileManager.default.fileExists(atPath: directory) else { return nil }
        var pids: [Int32] = []
        var pending = [directory]
        while let current = pending.popLast() {
            for line in (ProcFS.readText(current + "/cgroup.procs") ?? "").split(separator: "\n") {
                if let pid = Int32(line) { pids.append(pid) }
            }
            for entry in (try? FileManager.default.contentsOfDirectory(atPath: current)) ?? [] {
                var info = stat()
                let path = current + "/" + entry
                if stat(path, &info) == 0 && info.st_mode & S_IFMT == Glibc.S_IFDIR { pending.append(path) }
            }
        }
        return pids
    }

    /// Every process in the runs of `app` (`scopefs revoke --kill`).
    package func processes(of app: AppID) -> [Int32] {
        let leaves = runs.withLock { $0.filter { $0.value.app == app }.map(\.key) }
        return leaves.flatMap { processes(inLeaf: $0) ?? [] }
    }

    /// Removes an empty run leaf and forgets it.
    package func remove(leaf: String) {
        guard leaf.hasPrefix(Self.leafPrefix), !leaf.contains("/") else { return }
        if rmdir(mountPath + base + "/" + leaf) == 0 || errno == ENOENT { runs.withLock { $0[leaf] = nil } }
    }

    private static func write(_ text: String, to path: String) -> Bool {
        let descriptor = open(path, O_WRONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        let bytes = Array(text.utf8)
        return Glibc.write(descriptor, bytes, bytes.count) == bytes.count
    }
}
