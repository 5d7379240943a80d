import Policy
import Testing

@testable import ScopeFS

/// The node budget's choice of nodes for the kernel to forget (issue 52;
/// SPEC S40: folder nodes have a bound): least recently used first, each
/// chosen once until its FORGET, a used node given another turn.
@Suite struct NodeBudgetTests {
    let table: NodeTable
    let view: UInt32
    let rootInode: UInt64
    let place = Place.provider("com.example.app", "local")

    /// A table with a budget of `limit` (target `limit - limit / 8`) and a
    /// provider root, which is never chosen.
    init(limit: Int = 800) {
        table = NodeTable(
            root: Node(
                inode: NodeTable.rootInode, place: .root, view: 0, identity: nil, isDirectory: true, folder: nil,
                isDomainRoot: false),
            budget: NodeBudget(limit: limit))
        let place = place
        let view = table.view(of: place)
        self.view = view
        rootInode =
            table.lookup(
                key: NodeKey(view: view, identity: FileIdentity(device: 7, inode: 1), kind: .directory),
                parent: NodeTable.rootInode, name: "local"
            ) { inode in
                Node(
                    inode: inode, place: place, view: view, identity: FileIdentity(device: 7, inode: 1),
                    isDirectory: true, folder: nil, isDomainRoot: true)
            }.inode
    }

    /// Looks up `count` new files named f<first>... in the root; their inodes.
    func add(_ count: Int, from first: Int = 0) -> [UInt64] {
        let (place, view) = (place, view)
        return (first..<first + count).map { number in
            let identity = FileIdentity(device: 7, inode: UInt64(100 + number))
            return table.lookup(
                key: NodeKey(view: view, identity: identity, kind: .file), parent: rootInode, name: "f\(number)"
            ) { inode in
                Node(
                    inode: inode, place: place, view: view, identity: identity, isDirectory: false, folder: nil,
                    isDomainRoot: false)
            }.inode
        }
    }

    func chosen() -> [UInt64] {
        var all: [UInt64] = []
        while let batch = table.nodesToForget(batch: 64) { all += batch.map(\.inode) }
        return all
    }

    @Test("Under the budget's target nothing is chosen")
    func underTarget() {
        _ = add(600)
        #expect(table.nodesToForget(batch: 64) == nil)
    }

    @Test("Over it, the oldest nodes down to the target, each with its entry, never the provider root")
    func oldestFirst() {
        let inodes = add(1000)
        let picked = chosen()
        // 1,002 nodes with the roots; the target is 700.
        #expect(picked == Array(inodes.prefix(302)))
    }

    @Test("A node chosen is not chosen again before its FORGET; after the FORGETs the next oldest are")
    func chosenOnce() {
        let inodes = add(1000)
        let picked = chosen()
        #expect(chosen().isEmpty)
        for inode in picked { table.forget(inode, count: 1) }
        #expect(chosen().isEmpty)
        _ = add(100, from: 1000)
        #expect(chosen() == Array(inodes[302..<402]))
    }

    @Test("A node used since the hand passed gets another turn")
    func usedNodeKept() {
        let inodes = add(1000)
        _ = table.resolve(inodes[0], generation: 1)
        let picked = chosen()
        #expect(!picked.contains(inodes[0]))
        #expect(picked == Array(inodes[1...302]))
    }

    @Test("A chosen node the kernel kept and used again counts against the budget again")
    func keptNodeCounts() {
        let inodes = add(1000)
        let picked = chosen()
        // The kernel kept the first (a process's current folder) and used it:
        // 701 nodes count, one over the target.
        for inode in picked.dropFirst() { table.forget(inode, count: 1) }
        _ = table.resolve(inodes[0], generation: 1)
        #expect(chosen() == [inodes[302]])
    }
}
