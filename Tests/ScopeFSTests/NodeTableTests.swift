import Glibc
import Policy
import SystemPackage
import Testing

@testable import ScopeFS

/// The node table's names and parents after renames, exchanges, links and
/// removals (issue 15; SPEC S34: an app cannot crash or stall the daemon,
/// S35: renames inside granted folders behave as on the host).
@Suite struct NodeTableTests {
    typealias Entry = NodeTableModel.Entry

    @Test("Issue 15: exchanging two folders, then moving one's old parent into the other, leaves no parent cycle")
    func exchangeThenMove() throws {
        var model = NodeTableModel()
        let root = model.rootObject
        let (p1, p2) = model.createPair("p1", "p2", folder: true)
        model.create(Entry(parent: p1, name: "a"), folder: true)
        let b = model.made(Entry(parent: p2, name: "b"), folder: true)
        model.exchange(Entry(parent: p1, name: "a"), Entry(parent: p2, name: "b"))
        #expect(model.check() == nil)
        // `b` now sits at p1/a: moving p2 into it is legal on the host.
        model.rename(Entry(parent: root, name: "p2"), Entry(parent: b, name: "p2moved"), .plain)
        #expect(model.check() == nil)
        let moved = model.held[p2]!.inode
        #expect(try model.table.path(of: moved) == "p1/a/p2moved")
    }

    @Test("Issue 15: after exchanging two files, each node has the other's old name")
    func exchangeFiles() throws {
        var model = NodeTableModel()
        let root = model.rootObject
        let (a, b) = model.createPair("a", "b", folder: false)
        model.exchange(Entry(parent: root, name: "a"), Entry(parent: root, name: "b"))
        #expect(try model.table.path(of: model.held[a]!.inode) == "b")
        #expect(try model.table.path(of: model.held[b]!.inode) == "a")
        #expect(model.check() == nil)
    }

    @Test("A hard-linked file renamed away from one name is reached by the new one after the other goes")
    func renameHardLink() throws {
        var model = NodeTableModel()
        let root = model.rootObject
        let d = model.made(Entry(parent: root, name: "d"), folder: true)
        let file = model.made(Entry(parent: root, name: "a"), folder: false)
        model.link(Entry(parent: root, name: "a"), Entry(parent: root, name: "b"))
        model.rename(Entry(parent: root, name: "b"), Entry(parent: d, name: "c"), .plain)
        model.unlink(Entry(parent: root, name: "a"))
        #expect(model.check() == nil)
        #expect(try model.table.path(of: model.held[file]!.inode) == "d/c")
    }

    @Test("SPEC S33, issue 21: a folder moved on the host takes its subtree's folders along and forces location checks")
    func folderMovedOnHost() throws {
        var model = NodeTableModel()
        let root = model.rootObject
        let deep = model.made(Entry(parent: root, name: "deep"), folder: true)
        let a = model.made(Entry(parent: deep, name: "a"), folder: true)
        let b = model.made(Entry(parent: a, name: "b"), folder: true)
        _ = model.made(Entry(parent: b, name: "f.txt"), folder: false)
        let other = model.made(Entry(parent: root, name: "other"), folder: true)
        let inode = { (object: NodeTableModel.Object) in model.held[object]!.inode }
        let rootInode = inode(root)
        let epoch = { model.table.resolve(rootInode, generation: 0)!.epoch }
        let before = epoch()
        // A file's name, or one the table never saw, takes nothing along.
        #expect(model.table.folderMovedOnHost(named: "f.txt", in: [inode(b)]).isEmpty)
        #expect(model.table.folderMovedOnHost(named: "gone", in: [rootInode]).isEmpty)
        #expect(epoch() == before)
        let moved = Set(model.table.folderMovedOnHost(named: "deep", in: [rootInode]))
        #expect(moved == [inode(deep), inode(a), inode(b)])
        #expect(!moved.contains(inode(other)))
        #expect(epoch() != before)
    }

    @Test("SPEC S34: a parent cycle (a host change the table missed) is EIO, not a loop")
    func cycleIsAnError() throws {
        var model = NodeTableModel()
        let root = model.rootObject
        let d1 = model.made(Entry(parent: root, name: "d1"), folder: true)
        let d2 = model.made(Entry(parent: d1, name: "d2"), folder: true)
        // On the host, d1 was moved into d2 and d2 up to the root; the
        // kernel saw only the first half, through a cached d2.
        let key = NodeKey(view: model.view, identity: NodeTableModel.identity(d1), kind: .directory)
        _ = model.table.lookupKnown(key: key, parent: model.held[d2]!.inode, name: "d1")
        #expect(throws: Errno.ioError) { try model.table.path(of: model.held[d2]!.inode) }
        #expect(throws: Errno.ioError) { try model.table.path(of: model.held[d1]!.inode) }
        // Scans of the whole table skip such nodes (and still list the root).
        let scanned = model.table.nodes(app: "com.example.app", provider: "local", within: "").map(\.inode)
        #expect(scanned == [model.held[root]!.inode])
    }

    @Test("SPEC S34: a chain of folders deeper than PATH_MAX components is EIO; one just within it is not")
    func depthLimit() throws {
        let model = NodeTableModel()
        var parent = model.held[model.rootObject]!.inode
        var chain: [UInt64] = []
        for depth in 1...(PathWalk.maximumDepth + 1) {
            let identity = NodeTableModel.identity(UInt64(1000 + depth))
            let key = NodeKey(view: model.view, identity: identity, kind: .directory)
            let place = model.place
            let view = model.view
            parent =
                model.table.lookup(key: key, parent: parent, name: "d") { inode in
                    Node(
                        inode: inode, place: place, view: view, identity: identity, isDirectory: true, folder: nil,
                        isDomainRoot: false)
                }.inode
            chain.append(parent)
        }
        let withinLimit = try model.table.path(of: chain[PathWalk.maximumDepth - 1])
        #expect(withinLimit.count == 2 * PathWalk.maximumDepth - 1)
        #expect(throws: Errno.ioError) { try model.table.path(of: chain[PathWalk.maximumDepth]) }
    }

    /// Random sequences over a few names in three folders, so that renames
    /// meet existing targets, folders move into each other and files gain
    /// and lose hard links. Each sequence is checked after every step.
    @Test("Random create/link/rename/exchange/unlink sequences match the model", arguments: 0..<100)
    func randomSequences(seed: UInt64) {
        var random = SeededGenerator(seed: seed)
        var model = NodeTableModel()
        let names = ["a", "b", "c", "d"]
        for step in 0..<300 {
            let folders = Array(model.folders).sorted()
            func entry() -> Entry {
                Entry(parent: folders.randomElement(using: &random)!, name: names.randomElement(using: &random)!)
            }
            switch random.next() % 20 {
            case 0..<3: model.create(entry(), folder: false)
            case 3..<6: model.create(entry(), folder: true)
            case 6..<8: model.link(entry(), entry())
            case 8..<12:
                let kind = NodeTableModel.RenameKind.allCases.randomElement(using: &random)!
                model.rename(entry(), entry(), kind)
            case 12..<15: model.exchange(entry(), entry())
            case 15..<17: model.unlink(entry())
            case 17: model.lookUp(entry())
            case 18: model.shrink(entry())
            default: model.forgetOrphans()
            }
            if let problem = model.check() {
                let recent = model.log.suffix(12).joined(separator: "\n")
                Issue.record("seed \(seed), step \(step): \(problem)\nlast steps:\n\(recent)")
                return
            }
        }
    }
}

extension NodeTableModel {
    /// Creates two items of one kind in the root folder; returns them.
    mutating func createPair(_ first: String, _ second: String, folder: Bool) -> (Object, Object) {
        (
            made(Entry(parent: rootObject, name: first), folder: folder),
            made(Entry(parent: rootObject, name: second), folder: folder)
        )
    }

    /// Creates one item; returns it.
    mutating func made(_ entry: Entry, folder: Bool) -> Object {
        create(entry, folder: folder)
        return entries[entry]!
    }
}
