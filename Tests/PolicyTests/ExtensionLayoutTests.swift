import Policy
import PolicyStore
import Testing

/// Decision 63: a fleet's store names the replica of the host that added
/// an extension's provider; every host serves it from its own.
@Suite struct ExtensionLayoutTests {
    let here = StateDirectory(path: "/var/lib/host-b/state")
    let spec = ProviderExtensionSpec(name: "s3", command: nil, options: ["bucket": "docs"])

    @Test func anExtensionsProviderIsServedFromThisHostsReplica() {
        let recorded = Provider(
            id: "cloud", name: "Cloud", directory: "/home/owner/state/extensions/cloud/files", extension: spec)
        let served = recorded.served(from: here)
        #expect(served.directory == "/var/lib/host-b/state/extensions/cloud/files")
        #expect(served.directory == ExtensionLayout(state: here, provider: "cloud").files)
        #expect(served.id == recorded.id && served.name == recorded.name && served.extension == spec)
    }

    @Test func aLocalFolderAndAnUnplacedReadKeepTheRecordedDirectory() {
        let folder = Provider(id: "shared", name: "Shared", directory: "/srv/shared")
        #expect(folder.served(from: here) == folder)
        let recorded = Provider(id: "cloud", name: "Cloud", directory: "/elsewhere/files", extension: spec)
        #expect(recorded.served(from: nil) == recorded)
    }
}
