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

    /// The name is a file name, which may hold a newline: it is written
    /// with newlines and backslashes escaped, so it stays on its own line
    /// and cannot add or replace a field.
    public var bytes: [UInt8] {
        Array("\(Self.magic)\nprovider: \(provider)\nitem: \(item)\nname: \(Self.escape(name))\n".utf8)
    }

    /// Parses a stub; nil for any file that is not one, including one that
    /// names a field twice.
    public static func parse(_ bytes: some Collection<UInt8>) -> ReferenceStub? {
        guard bytes.count <= maximumSize, bytes.starts(with: magic.utf8) else { return nil }
        var fields: [String: String] = [:]
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n").dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { return nil }
            let value = line[line.index(after: colon)...].drop(while: { $0 == " " })
            guard fields.updateValue(String(value), forKey: String(line[..<colon])) == nil else { return nil }
        }
        fields["name"] = fields["name"].map(unescape)
        guard let provider = fields["provider"], let item = fields["item"], let name = fields["name"],
            !provider.isEmpty, !item.isEmpty
        else { return nil }
        return ReferenceStub(provider: provider, item: item, name: name)
    }

    /// By Unicode scalar, not Character: "\r\n" is one Character in Swift.
    private static func escape(_ name: String) -> String {
        var result = String.UnicodeScalarView()
        for scalar in name.unicodeScalars {
            switch scalar {
            case "\\": result.append(contentsOf: "\\\\".unicodeScalars)
            case "\n": result.append(contentsOf: "\\n".unicodeScalars)
            case "\r": result.append(contentsOf: "\\r".unicodeScalars)
            default: result.append(scalar)
            }
        }
        return String(result)
    }

    private static func unescape(_ text: String) -> String {
        var result = String.UnicodeScalarView()
        var escaped = false
        for scalar in text.unicodeScalars {
            if escaped {
                result.append(scalar == "n" ? "\n" : scalar == "r" ? "\r" : scalar)
                escaped = false
            } else if scalar == "\\" {
                escaped = true
            } else {
                result.append(scalar)
            }
        }
        return String(result)
    }

    /// The symbolic-link target a reference shows through the mount (SPEC
    /// S23): relative, from the stub's folder up to `MOUNT/<app>` and down
    /// into the app's own `Providers/` view, so it also works in `--sandbox`.
    /// `containerPath` is the stub's path inside the container.
    public static func linkTarget(containerPath: String, provider: ProviderID, itemPath: String) -> String {
        let depth = containerPath.split(separator: "/").count
        let up = Array(repeating: "..", count: depth).joined(separator: "/")
        return up + "/" + MountLayout.providerPath(provider: provider, path: itemPath)
    }
}

/// Where an item is now (SPEC §1 "Item identifier").
public struct ItemLocation: Sendable, Hashable, Codable {
    public var provider: ProviderID
    public var path: String
    public var isDirectory: Bool
    /// False when the item could not be found any more.
    public var exists: Bool
    /// The host file the item was recorded as; nil where not known.
    public var file: ItemFile?

    public init(provider: ProviderID, path: String, isDirectory: Bool, exists: Bool, file: ItemFile? = nil) {
        self.provider = provider
        self.path = path
        self.isDirectory = isDirectory
        self.exists = exists
        self.file = file
    }
}

/// The host file an item is (SPEC §1 "Item identifier"): device and inode
/// number, as `stat` gives them. A path names whatever file is there now;
/// this names the one the user chose.
public struct ItemFile: Sendable, Hashable, Codable {
    public var device: UInt64
    public var inode: UInt64

    public init(device: UInt64, inode: UInt64) {
        self.device = device
        self.inode = inode
    }
}
