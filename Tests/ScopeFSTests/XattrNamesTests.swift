import Testing

@testable import ScopeFS

/// The host's attribute list as the mount shows it (issue 21, SPEC S35):
/// everything but the SELinux label, which the mount does not support.
@Suite struct XattrNamesTests {
    private func list(_ names: String...) -> [UInt8] { names.flatMap { Array($0.utf8) + [0] } }

    @Test("The label goes from a list; other names, even ones sharing its prefix, stay in order")
    func labelRemoved() {
        let host = list("user.a", "security.selinux", "security.selinuxx", "user.b")
        #expect(ScopeFileSystem.withoutSELinuxLabel(host) == list("user.a", "security.selinuxx", "user.b"))
    }

    @Test("A list without the label, an empty one, and one of the label alone")
    func edges() {
        #expect(ScopeFileSystem.withoutSELinuxLabel(list("user.a")) == list("user.a"))
        #expect(ScopeFileSystem.withoutSELinuxLabel([]) == [])
        #expect(ScopeFileSystem.withoutSELinuxLabel(list("security.selinux")) == [])
    }
}
