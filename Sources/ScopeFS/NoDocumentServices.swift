import Policy
import SystemPackage

/// Document services for a file system that serves no documents: no item
/// identifiers or bookmarks (ENOTSUP), and nobody to tell of changes. What
/// a `ScopeFileSystem` needs to be built without a daemon — the in-process
/// tests (issue 51, finding 4) — and a statement of what the daemon adds.
public struct NoDocumentServices: DocumentServices {
    public init() {}
    public func itemIdentifier(provider: ProviderID, path: String) throws(Errno) -> ItemIdentifier {
        throw .notSupported
    }
    public func bookmark(app: AppID, provider: ProviderID, path: String, access: Access) throws(Errno) -> String {
        throw .notSupported
    }
    public func itemsMayHaveMoved() {}
    public func itemReplaced(provider: ProviderID, path: String) {}
    public func containerItemRead(app: AppID, process: ProcessKey, path: String) {}
    public var followsContainerReads: Bool { false }
    public func contentWritten(by app: AppID, provider: ProviderID, path: String, in snapshot: PolicySnapshot) {}
    public var presentersListen: Bool { false }
    public func subitemWillChange(provider: ProviderID, _ change: SubitemChange) {}
    public func subitemDidNotChange(provider: ProviderID, _ change: SubitemChange) {}
    public func subitemChanged(
        by app: AppID, provider: ProviderID, _ change: SubitemChange, in snapshot: PolicySnapshot
    ) {}
}
