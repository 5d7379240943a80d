import Foundation
import Testing

@testable import ScopeFSClient

#if canImport(Glibc)
    import Glibc
#endif

@Suite struct ErrorKindTests {
    @Test("Issue 19, SPEC S31: no daemon is its own kind, not \"not visible\"")
    func noDaemon() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("scopefs-no-daemon-\(getpid())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let socketPath = folder.appendingPathComponent("control.sock").path
        let error = #expect(throws: ScopeFSError.self) {
            try ControlSocket.exchange(Data("{}".utf8), socketPath: socketPath)
        }
        #expect(error?.kind == .noDaemon)
        #expect(error?.errno == ECONNREFUSED)
    }

    @Test("Issue 19, SPEC S26: ENOENT from resolving is a deleted item; on a path it is an invisible one")
    func deletedOrInvisible() {
        #expect(ScopeFSError(errno: ENOENT, operation: .resolveBookmark, path: "s").kind == .itemDeleted)
        #expect(ScopeFSError(errno: ENOENT, operation: .start, path: "p").kind == .notVisible)
        #expect(ScopeFSError(errno: ENODATA, operation: .start, path: "p").kind == .notScopeFS)
        #expect(ScopeFSError(errno: EPERM, operation: .resolveBookmark, path: "s").kind == .denied)
    }
}
