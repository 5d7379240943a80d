import Foundation

/// What a reference document (SPEC S22–S24) says about its item — read
/// through the reference, which the kernel follows to the item, or on a
/// provider item directly.
public struct ReferenceInfo: Sendable, Equatable {
    public var provider: String
    /// Apple's "container display name".
    public var providerName: String
    public var item: String
    /// The item's path inside its provider now.
    public var path: String
    /// `active` or `revoked`.
    public var grantState: String
}

extension ScopeFS {
    /// Reads a reference document's item metadata.
    /// - Throws: `ScopeFSError` — ENODATA outside provider views, EPERM, ENOENT.
    public static func referenceInfo(for url: URL) throws(ScopeFSError) -> ReferenceInfo {
        let path = try url.scopeFSPath(for: .inspectReference)
        func read(_ name: String) throws(ScopeFSError) -> String {
            try readAttributeText("user.scopefs." + name, of: path, for: .inspectReference)
        }
        return ReferenceInfo(
            provider: try read("provider"), providerName: try read("provider-name"), item: try read("item"),
            path: try read("path"), grantState: try read("grant-state"))
    }
}
