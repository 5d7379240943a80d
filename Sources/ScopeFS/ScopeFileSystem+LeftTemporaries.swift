import Glibc
import HostText
import Policy
import SystemPackage

/// The temporaries of saves that will never be finished (SPEC S48, S40):
/// a save's temporary is the app's while it saves, and its host file sits
/// in the owner's folder under a hidden name. When the app's last process
/// exits, when the grant it would replace loses its access, or when the
/// daemon that knew it is gone, nothing can rename it over the document
/// any more; it is removed then, so an app that crashed mid-save or was
/// revoked leaves no files behind in the owner's folders.
extension ScopeFileSystem {
    /// Removes the temporaries of `app`, whose last process exited.
    public func removeTemporaries(of app: AppID) {
        removeHostFiles(temporaries.removeAll { key, _ in key.app == app })
    }

    /// Removes the temporaries made to replace a file of `grants`, which
    /// lost their access (revoked, forgotten): a revoke cuts the save.
    func removeTemporaries(replacing grants: Set<GrantID>) {
        guard !grants.isEmpty else { return }
        removeHostFiles(temporaries.removeAll { _, temporary in grants.contains(temporary.grant) })
    }

    /// Removes what an earlier daemon's apps left: hidden files named as
    /// `ReplacementTemporaries.hostName` names them beside a file that is
    /// granted alone. Run once the mount serves; a temporary an app makes
    /// meanwhile is recorded before its file exists, and is kept.
    public func removeLeftTemporaries() -> Int {
        let snapshot = self.snapshot
        var folders: [ProviderID: [String: Set<String>]] = [:]
        for grant in snapshot.grantsByID.values where !grant.isDirectory {
            let folder = RelativePath.parent(of: grant.relativePath) ?? ""
            folders[grant.provider, default: [:]][folder, default: []].insert(
                RelativePath.lastComponent(of: grant.relativePath))
        }
        var removed = 0
        for (provider, byFolder) in folders {
            for (folder, granted) in byFolder {
                guard let directory = try? hostFolder(provider: provider, path: folder) else { continue }
                defer { Sys.close(directory) }
                guard let stream = try? HostDirectoryStream(directory: directory) else { continue }
                var left: [String] = []
                while let entry = stream.peek() {
                    let name = HostName.string(cString: entry.name)
                    if granted.contains(where: { ReplacementTemporaries.isHostName(name, beside: $0) }) {
                        left.append(name)
                    }
                    stream.advance()
                }
                for name in left
                where !temporaries.holds(provider: provider, hostPath: RelativePath.join(folder, name)) {
                    if removeRegularFile(name, in: directory) { removed += 1 }
                }
            }
        }
        return removed
    }

    private func removeHostFiles(_ files: [(provider: ProviderID, hostPath: String)]) {
        for file in files {
            guard
                let directory = try? hostFolder(
                    provider: file.provider, path: RelativePath.parent(of: file.hostPath) ?? "")
            else { continue }
            _ = removeRegularFile(RelativePath.lastComponent(of: file.hostPath), in: directory)
            Sys.close(directory)
        }
    }

    /// Unlinks `name` when it is a regular file: a temporary's name is
    /// ScopeFS's own, and anything else there is the owner's.
    private func removeRegularFile(_ name: String, in directory: Int32) -> Bool {
        guard let info = try? Sys.statAt(directory, name), info.st_mode & S_IFMT == S_IFREG else { return false }
        return (try? Sys.unlinkAt(directory, name, 0)) != nil
    }

    /// An O_PATH descriptor of the provider's folder at `path`, opened a
    /// component at a time, never through a symbolic link (SPEC S33).
    private func hostFolder(provider: ProviderID, path: String) throws(Errno) -> Int32 {
        guard let root = withPolicy({ $0.providers[provider]?.directory }) else { throw .noSuchFileOrDirectory }
        var directory = try Sys.openAt(AT_FDCWD, root, Sys.pathOnly | O_DIRECTORY)
        for component in path.split(separator: "/") {
            let parent = directory
            defer { Sys.close(parent) }
            directory = try Sys.openAt(parent, String(component), Sys.pathOnly | O_DIRECTORY | O_NOFOLLOW)
        }
        return directory
    }
}
