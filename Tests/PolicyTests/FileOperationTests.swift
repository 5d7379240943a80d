import Policy
import Testing

/// Operation names are part of the event log and of fault rules (SPEC S29,
/// docs/CLI.md `fault add`): they must not follow Swift method names.
@Suite("File operations")
struct FileOperationTests {
    @Test("every operation keeps its name in events and fault rules")
    func stableNames() {
        let names = FileOperation.allCases.map(\.rawValue)
        #expect(
            names == [
                "lookup", "getattr", "setattr", "readlink", "access", "mknod", "mkdir", "symlink", "link", "unlink",
                "rmdir", "rename", "open", "create", "read", "write", "fsync", "fallocate", "copy_file_range",
                "opendir", "readdir", "fsyncdir", "statfs", "getxattr", "setxattr", "listxattr", "removexattr",
                "control", "start",
            ])
    }

    @Test("fault rules name the file system's requests, not the control attributes")
    func faultable() {
        #expect(FaultRule.operations.contains("*"))
        #expect(FaultRule.operations.contains("copy_file_range"))
        #expect(!FaultRule.operations.contains("control"))
        #expect(!FaultRule.operations.contains("start"))
        #expect(FaultRule.operations.count == FileOperation.allCases.count - 1)
    }

    @Test("operations on a name in a folder are the folder's")
    func inFolder() {
        #expect(FileOperation.create.actsInFolder)
        #expect(FileOperation.rename.actsInFolder)
        #expect(!FileOperation.read.actsInFolder)
        #expect(!FileOperation.getattr.actsInFolder)
    }
}
