import Foundation
import FuseBridge
import Glibc
import Policy
import Synchronization
import SystemPackage

/// The content of a provider whose items live elsewhere (an extension,
/// SPEC S41–S43): its host folder is a replica whose files may be
/// placeholders, present only in part. The mount asks before it reads
/// or writes a replica file, and tells what apps changed; a provider
/// without one (a local folder) costs a dictionary miss.
///
/// Called on FUSE workers, after the gate and the scope check (S42: a
/// revoked or unscoped app causes no traffic). The calls that wait (for a
/// download) take the request's `interruption`, which a signal to the app
/// cancels (EINTR).
public protocol ProviderContent: AnyObject, Sendable {
    /// Bytes `[offset, offset + length)` of the replica file `file` must be
    /// on disk before the read is served. `edition`: the one the reading
    /// descriptor was opened at; a read of a later one is ESTALE, so that
    /// one open never sees two versions (issue 47, S42).
    func prepareRead(_ file: ContentFile, offset: Int64, length: Int, edition: UInt64?, interruption: Interruption)
        throws(Errno)
    /// How many remote changes of `file`'s content the replica has applied
    /// (not the app's own uploads): a descriptor remembers it at its open.
    func edition(_ file: ContentFile) -> UInt64
    /// An app opens `file`: for writing, its whole content must be on disk
    /// first (unless `truncates`).
    func prepareOpen(_ file: ContentFile, writes: Bool, truncates: Bool, interruption: Interruption) throws(Errno)
    /// An app changes `file`'s size without a handle of its own (truncate by
    /// path): the content must be on disk first (unless it is emptied).
    func prepareTruncate(_ file: ContentFile, toZero: Bool, interruption: Interruption) throws(Errno)
    /// An app's handle on `file` was closed; `wrote`: it changed the content.
    func closed(_ file: ContentFile, wrote: Bool)
    /// An app is about to change `file`'s content (each write through a
    /// handle, a truncate, a fallocate, a copy): remembered before the
    /// write, so that a daemon killed before the close still uploads it
    /// (S43). `didWrite` follows once the change is on disk, or failed.
    /// `edition`: the one the writing descriptor was opened at (nil for a
    /// change by path or a new open): a remote edit applied since replaced
    /// the file it wrote, and the change is ESTALE before it is made (S49).
    func willWrite(_ file: ContentFile, edition: UInt64?) throws(Errno)
    func didWrite(_ file: ContentFile)
    /// An app made a new item at `file`'s inode (create, mknod, mkdir,
    /// symlink): the file system may have given it the inode of one removed
    /// a moment ago, whose removal the replica has not sent yet. `open`:
    /// the app holds a descriptor of it (create), an open until `closed`
    /// as any other: never evicted, its edition kept if it is removed.
    func created(_ file: ContentFile, open: Bool)
    /// An app asked for the content to be durable (fsync): upload soon.
    func synced(_ file: ContentFile)
    /// An app made, removed, renamed or changed the attributes of an item of
    /// the provider: the replica has changed, the remote must follow.
    func namespaceChanged(provider: ProviderID)
    /// The errno for a change the store cannot hold, before it is made
    /// (docs/PROVIDERS.md): a hard link, a device or FIFO, a symlink where
    /// the extension keeps none (EPERM), a rename where it cannot rename
    /// (EXDEV: `mv` copies and deletes). nil: go ahead.
    func refusal(of operation: FileOperation, provider: ProviderID) -> Errno?
    /// The blocks `stat` shows for a replica file (S42: 1 while nothing of a
    /// non-empty file is on disk, so that sparse-aware tools do not take it
    /// for a hole).
    func presentedBlocks(_ file: ContentFile, _ info: stat) -> blkcnt_t
    /// `user.scopefs.state` and `user.scopefs.progress` of `file` (nil: not
    /// an item of this provider).
    func state(_ file: ContentFile) -> String?
    func progress(_ file: ContentFile) -> String?
    /// The bytes of `file` on disk while some are missing, in order: what
    /// SEEK_DATA finds (the rest are holes, so that backup tools skip a
    /// placeholder without downloading it). nil: all of it is on disk, ask
    /// the file itself.
    func dataRanges(_ file: ContentFile) -> [Range<Int64>]?
    /// `file`'s preview (`user.scopefs.thumbnail`, SPEC S50), asked of the
    /// store if need be but never its content; nil: none.
    func thumbnail(_ file: ContentFile) -> [UInt8]?
    /// An app saved the preview of `file` (nil: removed it): it goes to
    /// the store with the file's next upload.
    func saveThumbnail(_ file: ContentFile, _ bytes: [UInt8]?)
}

extension ProviderContent {
    public func dataRanges(_ file: ContentFile) -> [Range<Int64>]? { nil }
    public func thumbnail(_ file: ContentFile) -> [UInt8]? { nil }
    public func saveThumbnail(_ file: ContentFile, _ bytes: [UInt8]?) {}
}

/// A replica file, as the mount knows it.
public struct ContentFile: Sendable {
    public var provider: ProviderID
    /// The app whose process asks; nil for the owner.
    public var app: AppID?
    public var device: UInt64
    public var inode: UInt64

    public init(provider: ProviderID, app: AppID?, device: UInt64, inode: UInt64) {
        self.provider = provider
        self.app = app
        self.device = device
        self.inode = inode
    }
}

/// A FUSE request's interruption (the app got a signal): the waiting call
/// registers what cancels its wait.
public struct Interruption: Sendable {
    let request: Request?

    public init(_ request: Request?) { self.request = request }

    /// None: nothing will interrupt (the daemon's own calls, tests).
    public static let none = Interruption(nil)

    /// Whether the calling thread has a signal pending that it handles (not
    /// blocked, not ignored). A read through the page cache waits on a page
    /// lock while the daemon answers the readahead, where the kernel sends
    /// no FUSE interrupt: the wait for a download polls this instead.
    public func signalPending() -> Bool {
        guard let request, request.threadID > 0 else { return false }
        guard let text = try? String(contentsOfFile: "/proc/\(request.threadID)/status", encoding: .utf8) else {
            return false
        }
        var masks: [String: UInt64] = [:]
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: ":", maxSplits: 1)
            guard parts.count == 2, ["SigPnd", "ShdPnd", "SigBlk", "SigCgt"].contains(String(parts[0])) else {
                continue
            }
            masks[String(parts[0])] = UInt64(parts[1].trimmingCharacters(in: .whitespaces), radix: 16)
        }
        let pending = (masks["SigPnd"] ?? 0) | (masks["ShdPnd"] ?? 0)
        return pending & ~(masks["SigBlk"] ?? 0) & (masks["SigCgt"] ?? 0) != 0
    }

    /// Runs `body` with `onInterrupt` called if the kernel interrupts the
    /// request meanwhile (at once if it already did).
    public func whileInterruptible<T, E: Error>(
        _ onInterrupt: @escaping @Sendable () -> Void, _ body: () throws(E) -> T
    ) throws(E) -> T {
        guard let request else { return try body() }
        return try request.whileInterruptible(onInterrupt, body)
    }
}

/// The mount's providers with a `ProviderContent`, set by the daemon as
/// extensions start. Read on every open and read: without any, one atomic
/// load.
final class ProviderContents: Sendable {
    private let any = Atomic<Bool>(false)
    private let contents = Mutex<[ProviderID: any ProviderContent]>([:])

    func set(_ content: (any ProviderContent)?, for provider: ProviderID) {
        contents.withLock { contents in
            contents[provider] = content
            any.store(!contents.isEmpty, ordering: .releasing)
        }
    }

    func content(of provider: ProviderID) -> (any ProviderContent)? {
        guard any.load(ordering: .acquiring) else { return nil }
        return contents.withLock { $0[provider] }
    }
}

extension ScopeFileSystem {
    /// Serves `provider`'s replica through `content` from now on (nil: a
    /// plain folder again).
    public func setContent(_ content: (any ProviderContent)?, for provider: ProviderID) {
        providerContents.set(content, for: provider)
    }

    /// The daemon is about to write bytes of `provider`'s replica file
    /// `inode` that change nothing an app can see (a download, an
    /// eviction): not news for presenters.
    public func noteOwnWrite(provider: ProviderID, inode: UInt64) {
        guard let directory = snapshot.providers[provider]?.directory, let info = try? Sys.statAt(AT_FDCWD, directory)
        else { return }
        table.noteOwnWrite(FileIdentity(device: UInt64(info.st_dev), inode: inode))
    }

    /// The nodes, in every view, of `provider`'s replica file `inode`: what
    /// the kernel may cache of it.
    public func kernelNodes(provider: ProviderID, inode: UInt64) -> [UInt64] {
        guard let directory = snapshot.providers[provider]?.directory, let info = try? Sys.statAt(AT_FDCWD, directory)
        else { return [] }
        return table.nodes(of: FileIdentity(device: UInt64(info.st_dev), inode: inode))
    }

    /// The content behind a provider node's file, and the file as it knows it.
    func content(of node: Node) -> (any ProviderContent, ContentFile)? {
        guard case .provider(let app, let provider) = node.place, let identity = node.identity,
            let content = providerContents.content(of: provider)
        else { return nil }
        return (
            content,
            ContentFile(provider: provider, app: app, device: identity.device, inode: identity.inode)
        )
    }

    /// Refuses, in a provider folder whose store cannot hold it, what the
    /// app is about to make (`ProviderContent.refusal`).
    func refuseUnstorable(_ operation: FileOperation, in folder: Node) throws(Errno) {
        guard case .provider(_, let provider) = folder.place, let content = providerContents.content(of: provider),
            let refusal = content.refusal(of: operation, provider: provider)
        else { return }
        throw refusal
    }

    /// The provider content behind a folder an app changes names in.
    func namespaceChanged(in folder: Node) {
        guard case .provider(_, let provider) = folder.place,
            let content = providerContents.content(of: provider)
        else { return }
        content.namespaceChanged(provider: provider)
    }

    /// A replica file's attributes as apps see them (S42's `st_blocks`).
    func presentedContent(_ node: Node, _ info: stat) -> stat {
        guard !node.isDirectory, let (content, file) = content(of: node) else { return info }
        var shown = info
        shown.st_blocks = content.presentedBlocks(file, info)
        return shown
    }
}
