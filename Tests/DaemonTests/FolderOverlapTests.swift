import CommandErrors
import Policy
import Testing

@testable import Processes

/// The rule that keeps a mount and the folders its daemon reads apart
/// (issue 50, finding 1; SPEC S34), without a mount.
@Suite struct FolderOverlapTests {
    @Test("Paths are made absolute and rid of . and .. by their words alone")
    func lexical() {
        #expect(FolderOverlap.lexical("/a//b/./c/../d/") == "/a/b/d")
        #expect(FolderOverlap.lexical("x/../../y", in: "/home/me") == "/home/y")
        #expect(FolderOverlap.lexical("/..") == "/")
    }

    @Test("Inside, above, the same, or apart; by bytes, not by normalisation")
    func relation() {
        #expect(FolderOverlap.relation(of: "/home/me/Documents", to: "/home/me/Documents") == "is")
        #expect(FolderOverlap.relation(of: "/home/me/Documents/mnt", to: "/home/me/Documents") == "is inside")
        #expect(FolderOverlap.relation(of: "/home/me", to: "/home/me/Documents") == "is above")
        #expect(FolderOverlap.relation(of: "/home/me/Doc", to: "/home/me/Documents") == nil)
        #expect(FolderOverlap.relation(of: "/srv/caf\u{E9}", to: "/srv/cafe\u{301}/x") == nil)
        #expect(FolderOverlap.relation(of: "/", to: "/srv") == "is above")
    }

    @Test("A mountpoint over a provider's folder or the state directory is refused with 73, naming both")
    func refusals() throws {
        let local = Provider(id: "local", name: "On My Laptop", directory: "/nonexistent-h5/docs")
        let error = #expect(throws: CommandError.self) {
            try FolderOverlap.refuseMount(at: "/nonexistent-h5", providers: [local], state: "/nonexistent-state")
        }
        #expect(error?.kind == .cannotMount)
        #expect(
            error?.message.contains("/nonexistent-h5 is above the folder of provider local, /nonexistent-h5/docs")
                == true)
        let state = #expect(throws: CommandError.self) {
            try FolderOverlap.refuseMount(at: "/nonexistent-state/sub", providers: [], state: "/nonexistent-state")
        }
        #expect(state?.message.contains("is inside the state directory") == true)
        try FolderOverlap.refuseMount(at: "/nonexistent-mnt", providers: [local], state: "/nonexistent-state")
    }
}
