/// A snapshot's grants by id (`PolicySnapshot.grantsByID`), kept in shards
/// by id so that a change copies the shards it touches, not the table: a
/// snapshot made from another by one revoke (`PolicySnapshot.applying`)
/// shares every other shard with it. A dictionary of a million grants took
/// 40 ms to copy and as long again to free (issue 34).
public struct GrantTable: Sendable {
    private static let shardCount = 1024
    /// Empty dictionaries allocate nothing: a small policy costs the array.
    private var shards = [[GrantID: Grant]](repeating: [:], count: GrantTable.shardCount)
    public private(set) var count = 0

    public init() {}

    public init(_ grants: some Sequence<Grant>) {
        for grant in grants where self[grant.id] == nil { self[grant.id] = grant }
    }

    private static func shard(_ id: GrantID) -> Int {
        Int(UInt64(bitPattern: id) % UInt64(shardCount))
    }

    public subscript(id: GrantID) -> Grant? {
        get { shards[Self.shard(id)][id] }
        set {
            let shard = Self.shard(id)
            let old: Grant?
            if let newValue {
                old = shards[shard].updateValue(newValue, forKey: id)
            } else {
                old = shards[shard].removeValue(forKey: id)
            }
            count += (newValue == nil ? 0 : 1) - (old == nil ? 0 : 1)
        }
    }

    public var isEmpty: Bool { count == 0 }

    /// Every id, in no particular order.
    public var keys: [GrantID] { shards.flatMap(\.keys) }

    /// Every grant, in no particular order.
    public var values: [Grant] { shards.flatMap(\.values) }
}
