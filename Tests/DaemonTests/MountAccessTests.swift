import Control
import FuseBridge
import HostText
import Testing

@testable import Daemon

/// Who the kernel lets into the mount (SPEC S5, S39; docs/DECISIONS.md, decisions 8 and 43).
@Suite struct MountAccessTests {
    let appAccount = AppAccount(name: "scopefs-app", uid: 991, gid: 991)

    @Test("SPEC S39: a root daemon admits only root and the app account, which acts as root")
    func rootOwner() {
        let access = MountAccess(
            ownerUID: 0, ownerGID: 0, appAccount: appAccount, allowOther: false)
        #expect(access.options == ["fsname=scopefs:", "subtype=scopefs", "allow_other"])
        #expect(access.admittedUsers == AdmittedUsers([0, 991]))
        #expect(access.alias == OwnerAlias(appUID: 991, appGID: 991, ownerUID: 0, ownerGID: 0))
    }

    @Test("SPEC S39: with --allow-other a root daemon lets the kernel check other users")
    func rootOwnerAllowOther() {
        let access = MountAccess(
            ownerUID: 0, ownerGID: 0, appAccount: appAccount, allowOther: true)
        #expect(access.options.contains("default_permissions"))
        #expect(access.admittedUsers == nil)
    }

    @Test("SPEC S39: without the app account, root's mount admits root alone and aliases nobody")
    func rootOwnerWithoutAccount() {
        let access = MountAccess(ownerUID: 0, ownerGID: 0, appAccount: nil, allowOther: false)
        #expect(access.admittedUsers == AdmittedUsers([0]))
        #expect(access.alias == nil)
    }

    @Test("SPEC S5: a user's daemon is the kernel's default: the owner alone, no alias")
    func userOwner() {
        let access = MountAccess(
            ownerUID: 1000, ownerGID: 1000, appAccount: nil, allowOther: false)
        #expect(access.options == ["fsname=scopefs:", "subtype=scopefs"])
        #expect(access.admittedUsers == nil && access.alias == nil)
        let shared = MountAccess(
            ownerUID: 1000, ownerGID: 1000, appAccount: nil, allowOther: true)
        #expect(shared.options.suffix(2) == ["allow_other", "default_permissions"])
    }

    @Test("Issue 50, S47: the source is no relative path and names no state directory")
    func source() {
        let access = MountAccess(ownerUID: 1000, ownerGID: 1000, appAccount: nil, allowOther: false)
        #expect(access.options.first == "fsname=scopefs:")
    }
}
