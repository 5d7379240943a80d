import Dispatch
import Foundation
import Glibc
import HostText
import Policy
import Synchronization

/// Where the previews of an extension's documents are kept for the
/// owner's file manager (SPEC S50): the daemon's freedesktop cache, under
/// the mount's own paths, which are what a file manager browsing the
/// mount looks up. Without one a file manager makes its own preview by
/// reading the document: for a dataless placeholder, a download.
public protocol OwnerPreviewKeeper: Sendable {
    /// Whether a preview of the mount's file at `viewPath` (from the mount
    /// point, `/APP/Providers/P/PATH`) made for modification time `mtime` is kept.
    func isKept(viewPath: String, mtime: Int) -> Bool
    /// Keeps `png` as that file's preview.
    func keep(_ png: [UInt8], viewPath: String, mtime: Int)
}

final class OwnerPreviewSource: Sendable {
    private let keeper = Mutex<(any OwnerPreviewKeeper)?>(nil)
    /// Folders whose previews are being kept, by host path: a folder
    /// listed again meanwhile is not queued twice.
    let pending = Mutex<Set<String>>([])
    /// One folder at a time, off the FUSE workers: the extension's
    /// `thumbnail` calls and the cache's writes wait there, no request does.
    let queue = DispatchQueue(label: "scopefs.owner-previews", qos: .utility)
    func set(_ new: (any OwnerPreviewKeeper)?) { keeper.withLock { $0 = new } }
    var current: (any OwnerPreviewKeeper)? { keeper.withLock { $0 } }
}

extension ScopeFileSystem {
    public func setOwnerPreviews(_ keeper: (any OwnerPreviewKeeper)?) {
        ownerPreviews.set(keeper)
    }

    /// The most files of one folder whose previews one listing keeps.
    static let ownerPreviewsPerFolder = 1000
    /// The most folders waiting at once: a walk of a large tree (`find`)
    /// queues no more than this; the folders it listed beyond are not
    /// kept until listed again.
    static let ownerPreviewFolders = 64

    /// The owner lists a folder of an extension's provider in the mount
    /// (the inspect view, S4): the previews of its files go into the
    /// owner's cache under their paths in the mount, as the extension
    /// gives them (`thumbnail`, cached per content version), never from
    /// their content. Files whose preview is kept for their current mtime
    /// cost a stat and a read of the cache. Only the files the listing
    /// shows (`entries`: a bare folder above grants shows only what leads
    /// to them), so no item outside the app's grants costs a call.
    func keepOwnerPreviews(of folder: Target, caller: Caller, entries: DirectoryHandle.Entries) {
        guard case .owner = caller, case .host(_, let shown, _) = entries, let keeper = ownerPreviews.current,
            case .provider(let app, let provider) = folder.node.place,
            let content = providerContents.content(of: provider),
            let directory = withPolicy({ $0.providers[provider]?.directory }),
            let relative = try? folder.path
        else { return }
        let hostFolder = relative.isEmpty ? directory : directory + "/" + relative
        let queued = ownerPreviews.pending.withLock { pending in
            pending.count < Self.ownerPreviewFolders && pending.insert(hostFolder).inserted
        }
        guard queued else { return }
        let viewFolder = MountLayout.providerPath(app: app, provider: provider, path: relative)
        ownerPreviews.queue.async { [ownerPreviews] in
            defer { _ = ownerPreviews.pending.withLock { $0.remove(hostFolder) } }
            let names = Self.fileNames(in: hostFolder).filter { shown?.contains(HostNameKey($0)) ?? true }
            for name in names.prefix(Self.ownerPreviewsPerFolder) {
                var info = stat()
                guard (hostFolder + "/" + name).withHostCString({ lstat($0, &info) }) == 0,
                    (info.st_mode & S_IFMT) == S_IFREG
                else { continue }
                let viewPath = viewFolder + "/" + name
                let mtime = Int(info.st_mtim.tv_sec)
                if keeper.isKept(viewPath: viewPath, mtime: mtime) { continue }
                let file = ContentFile(
                    provider: provider, app: app, device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
                guard let png = content.thumbnail(file) else { continue }
                keeper.keep(png, viewPath: viewPath, mtime: mtime)
            }
        }
    }

    /// The names in a host folder as bytes (S33a), staging files left out.
    private static func fileNames(in folder: String) -> [String] {
        guard let stream = folder.withHostCString({ Glibc.opendir($0) }) else { return [] }
        defer { Glibc.closedir(stream) }
        var names: [String] = []
        while let entry = Glibc.readdir(stream) {
            let name = withUnsafePointer(to: entry.pointee.d_name) {
                $0.withMemoryRebound(to: CChar.self, capacity: 256) { HostName.string(cString: $0) }
            }
            if name != "." && name != ".." && !StagingNames.isStaging(name) { names.append(name) }
        }
        return names
    }
}
