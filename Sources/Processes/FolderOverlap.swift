import CommandErrors
import Foundation
import HostText
import Policy
import PolicyStore

/// A ScopeFS mount and the folders its daemon reads must not be inside one
/// another (issue 50, SPEC S34). A daemon mounted on a provider's folder,
/// above it, or above its own state directory asks its own mount for what
/// it serves before its loop runs, and waits for good (the kernel's
/// `fuse_do_getattr → fuse_get_req`); a provider folder inside a mount
/// makes every listing of it a call of the daemon to itself. So both are
/// refused before anything is mounted or stored, with both paths named.
///
/// The checks read paths, not the file system, where a wedged mount could
/// be on the way: `lexical` never stats, and the mounts come from
/// /proc/self/mountinfo.
package enum FolderOverlap {
    /// The file system types of ScopeFS's mounts (the mount and the
    /// portal's document layout), as mountinfo shows them.
    static let mountTypePrefix = "fuse.scopefs"

    /// `path` made absolute (against the working directory) and rid of
    /// `.`, `..` and repeated slashes, without touching the file system.
    package static func lexical(_ path: String, in directory: String = FileManager.default.currentDirectoryPath)
        -> String
    {
        let absolute = path.hasPrefix("/") ? path : directory + "/" + path
        var kept: [Substring] = []
        for component in absolute.split(separator: "/") where component != "." {
            if component == ".." {
                _ = kept.popLast()
            } else {
                kept.append(component)
            }
        }
        return "/" + kept.joined(separator: "/")
    }

    /// Whether `inner` is `outer` or a path below it (both lexical), by
    /// bytes: names that differ only by normalisation are other folders.
    static func contains(_ outer: String, _ inner: String) -> Bool {
        let outerParts = outer.split(separator: "/")
        let innerParts = inner.split(separator: "/")
        guard outerParts.count <= innerParts.count else { return false }
        return zip(outerParts, innerParts).allSatisfy { String($0).sameHostName(as: String($1)) }
    }

    /// How folder `a` lies against folder `b`, in words; nil when neither
    /// is inside the other.
    static func relation(of a: String, to b: String) -> String? {
        if contains(b, a) { return contains(a, b) ? "is" : "is inside" }
        return contains(a, b) ? "is above" : nil
    }

    /// `path` and, where it differs, what its symbolic links lead to: a
    /// link may hide an overlap that the path itself does not show.
    static func forms(of path: String) -> [String] {
        let plain = lexical(path)
        guard let real = HostFiles.realPath(plain), !real.sameHostName(as: plain) else { return [plain] }
        return [plain, real]
    }

    /// Refuses a mountpoint that is, is inside or is above a provider's
    /// folder, the state directory, or another ScopeFS mount (exit 73).
    package static func refuseMount(at mountpoint: String, providers: [Provider], state: String)
        throws(CommandError)
    {
        let targets = forms(of: mountpoint)
        for provider in providers.sorted(by: { $0.id < $1.id }) {
            let what = provider.extension == nil ? "the folder" : "the replica folder"
            try refuse(targets, against: forms(of: provider.directory), "\(what) of provider \(provider.id)")
        }
        try refuse(targets, against: forms(of: state), "the state directory")
        for other in scopefsMounts() where !other.sameHostName(as: targets[0]) {
            try refuse(targets, against: [other], "another ScopeFS mount")
        }
    }

    /// How a provider's folder lies against a ScopeFS mount.
    package struct ProviderFolderOverlap: Sendable, Equatable {
        package var provider: String
        package var folder: String
        /// "is", "is inside" or "is above".
        package var relation: String
        package var mount: String

        /// `FOLDER is above the ScopeFS mount MOUNT`: for an event.
        package var summary: String { "\(folder) \(relation) the ScopeFS mount \(mount)" }

        /// The refusal, for people.
        package var sentence: String {
            """
            refused: the folder of provider \(provider), \(folder.escapedForTerminal), \(relation) the ScopeFS mount \
            \(mount.escapedForTerminal): the daemon would ask its own mount for the provider's items. \
            Give a folder outside every ScopeFS mount (see docs/CLI.md, "Where to mount")
            """
        }
    }

    /// Refuses a provider folder that is, is inside or is above a ScopeFS
    /// mount of this mount namespace (exit 73).
    package static func refuseProvider(_ id: String, at directory: String) throws(CommandError) {
        if let overlap = providerOverlap(id, at: directory) { throw CommandError(.cannotMount, overlap.sentence) }
    }

    /// How a provider's folder overlaps a ScopeFS mount of this mount
    /// namespace, nil when it does not. The path is compared as given
    /// before any link of it is followed, which could lead into a mount.
    /// A daemon asks it of each provider a reload brings (another host's,
    /// on a fleet), which no CLI of this host checked (`ProviderOverlaps`).
    package static func providerOverlap(_ id: String, at directory: String) -> ProviderFolderOverlap? {
        let mounts = scopefsMounts()
        guard !mounts.isEmpty else { return nil }
        let plain = lexical(directory)
        for mount in mounts {
            if let how = relation(of: plain, to: mount) {
                return ProviderFolderOverlap(provider: id, folder: plain, relation: how, mount: mount)
            }
        }
        let folders = forms(of: directory)
        for mount in mounts {
            for folder in folders {
                if let how = relation(of: folder, to: mount) {
                    return ProviderFolderOverlap(provider: id, folder: folder, relation: how, mount: mount)
                }
            }
        }
        return nil
    }

    private static func refuse(_ mountpoints: [String], against folders: [String], _ what: String)
        throws(CommandError)
    {
        for mountpoint in mountpoints {
            for folder in folders {
                guard let how = relation(of: mountpoint, to: folder) else { continue }
                throw CommandError(
                    .cannotMount,
                    """
                    refused: the mountpoint \(mountpoint.escapedForTerminal) \(how) \(what), \
                    \(folder.escapedForTerminal): the daemon would wait on its own mount. Mount on an empty \
                    folder outside the providers' folders and the state directory, e.g. ~/ScopeFS \
                    (see docs/CLI.md, "Where to mount")
                    """)
            }
        }
    }

    /// The mountpoints of ScopeFS's mounts in this mount namespace.
    static func scopefsMounts() -> [String] {
        MountTable.mountpoints(ofType: { $0.hasPrefix(mountTypePrefix) })
    }
}
