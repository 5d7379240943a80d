import Policy
import Testing

/// The paths inside the mount (SPEC S2, S18, S23), built in one place.
@Suite("Mount layout")
struct MountLayoutTests {
    @Test("provider items in the app's view and from the mount's root")
    func providerPaths() {
        #expect(MountLayout.providerPath(provider: "local", path: "") == "Providers/local")
        #expect(MountLayout.providerPath(provider: "local", path: "docs/a.txt") == "Providers/local/docs/a.txt")
        #expect(
            MountLayout.providerPath(app: "com.example.app", provider: "local", path: "a.txt")
                == "/com.example.app/Providers/local/a.txt")
    }

    @Test("container paths and the inbox")
    func containerPaths() {
        #expect(MountLayout.containerPath("") == "Container")
        #expect(MountLayout.containerPath("tmp/x") == "Container/tmp/x")
        #expect(MountLayout.containerPath(app: "a", path: "Documents/r") == "/a/Container/Documents/r")
        #expect(MountLayout.inbox(of: "com.example.app") == "tmp/com.example.app-Inbox")
    }

    @Test("a path in the app's view parses back to its provider and item")
    func parse() {
        #expect(MountLayout.providerItem(inAppView: "Providers/local/docs/a.txt")! == ("local", "docs/a.txt"))
        #expect(MountLayout.providerItem(inAppView: "Providers/local")! == ("local", ""))
        #expect(MountLayout.providerItem(inAppView: "Providers") == nil)
        #expect(MountLayout.providerItem(inAppView: "Container/Documents/a") == nil)
        #expect(MountLayout.containerItem(inAppView: "Container/Documents/a") == "Documents/a")
        #expect(MountLayout.containerItem(inAppView: "Container") == nil)
        #expect(MountLayout.containerItem(inAppView: "Containers/x") == nil)
        #expect(MountLayout.containerItem(inAppView: "Providers/local/a") == nil)
    }

    @Test("a reference's link climbs to the app's directory, then into Providers (SPEC S23)")
    func referenceLink() {
        #expect(
            ReferenceStub.linkTarget(containerPath: "Documents/refs/a.txt", provider: "local", itemPath: "docs/a.txt")
                == "../../../Providers/local/docs/a.txt")
    }
}
