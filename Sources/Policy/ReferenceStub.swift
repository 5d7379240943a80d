/// A reference document on disk (SPEC S22): a small text file in an app's
/// container that names a provider item by identifier — never by path.
///
///     scopefs-reference 1
///     provider: local
///     item: 5d1e…
///     name: chapter1.txt
public struct ReferenceStub: Sendable, Equatable {
    public var provider: ProviderID
    public var item: ItemIdentifier
    /// The display name the item had when the reference was made.
    public var name: String

    public static let magic = "scopefs-reference 1"
    /// Stubs are never larger than this; larger files are never parsed.
    public static let maximumSize = 4096

    public init(provider: ProviderID, item: ItemIdentifier, name: String) {
        self.provider = provider
        self.item = item
        self.name = name
    }

    public var bytes: [UInt8] {
        Array("\(Self.magic)\nprovider: \(provider)\nitem: \(item)\nname: \(name)\n".utf8)
    }

    /// Parses a stub; nil for any file that is not one.
    public static func parse(_ bytes: some Collection<UInt8>) -> ReferenceStub? {
        guard bytes.count <= maximumSize, bytes.starts(with: magic.utf8) else { return nil }
        var fields: [String: String] = [:]
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n").dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { return nil }
            let value = line[line.index(after: colon)...].drop(while: { $0 == " " })
            fields[String(line[..<colon])] = String(value)
        }
        guard let provider = fields["provider"], let item = fields["item"], let name = fields["name"],
            !provider.isEmpty, !item.isEmpty
        else { return nil }
        return ReferenceStub(provider: provider, item: item, name: name)
    }

    /// The symbolic-link target a reference shows through the mount (SPEC
    /// S23): relative, from the stub's folder up to `MOUNT/<app>` and down
    /// into the app's own `Providers/` view, so it also works in `--sandbox`.
    /// `containerPath` is the stub's path inside the container.
    public static func linkTarget(containerPath: String, provider: ProviderID, itemPath: String) -> String {
        let depth = containerPath.split(separator: "/").count
        let up = Array(repeating: "..", count: depth).joined(separator: "/")
        return up + "/Providers/" + provider + (itemPath.isEmpty ? "" : "/" + itemPath)
    }
}

/// Where an item is now (SPEC §1 "Item identifier").
public struct ItemLocation: Sendable, Hashable, Codable {
    public var provider: ProviderID
    public var path: String
    public var isDirectory: Bool
    /// False when the item could not be found any more.
    public var exists: Bool

    public init(provider: ProviderID, path: String, isDirectory: Bool, exists: Bool) {
        self.provider = provider
        self.path = path
        self.isDirectory = isDirectory
        self.exists = exists
    }
}
