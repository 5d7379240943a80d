import Control
import FuseBridge
import HostText
import Testing

@testable import Daemon

/// Who the kernel lets into the mount (SPEC S5, S39; ARCHITECTURE.md 8, 43).
@Suite struct MountAccessTests {
    let appAccount = AppAccount(name: "scopefs-app", uid: 991, gid: 991)

    @Test("SPEC S39: a root daemon admits only root and the app account, which acts as root")
    func rootOwner() {
        let access = MountAccess(
            source: "/srv/state", ownerUID: 0, ownerGID: 0, appAccount: appAccount, allowOther: false)
        #expect(access.options == ["fsname=/srv/state", "subtype=scopefs", "allow_other"])
        #expect(access.admittedUsers == AdmittedUsers([0, 991]))
        #expect(access.alias == OwnerAlias(appUID: 991, appGID: 991, ownerUID: 0, ownerGID: 0))
    }

    @Test("SPEC S39: with --allow-other a root daemon lets the kernel check other users")
    func rootOwnerAllowOther() {
        let access = MountAccess(
            source: "/srv/state", ownerUID: 0, ownerGID: 0, appAccount: appAccount, allowOther: true)
        #expect(access.options.contains("default_permissions"))
        #expect(access.admittedUsers == nil)
    }

    @Test("SPEC S39: without the app account, root's mount admits root alone and aliases nobody")
    func rootOwnerWithoutAccount() {
        let access = MountAccess(source: "/srv/state", ownerUID: 0, ownerGID: 0, appAccount: nil, allowOther: false)
        #expect(access.admittedUsers == AdmittedUsers([0]))
        #expect(access.alias == nil)
    }

    @Test("SPEC S5: a user's daemon is the kernel's default: the owner alone, no alias")
    func userOwner() {
        let access = MountAccess(
            source: "/srv/state", ownerUID: 1000, ownerGID: 1000, appAccount: nil, allowOther: false)
        #expect(access.options == ["fsname=/srv/state", "subtype=scopefs"])
        #expect(access.admittedUsers == nil && access.alias == nil)
        let shared = MountAccess(
            source: "/srv/state", ownerUID: 1000, ownerGID: 1000, appAccount: nil, allowOther: true)
        #expect(shared.options.suffix(2) == ["allow_other", "default_permissions"])
    }

    @Test("Issue 50: the source is the state directory, escaped for -o; a name that is not UTF-8 keeps the word")
    func source() {
        let odd = MountAccess(source: "/srv/a,b\\c", ownerUID: 1000, ownerGID: 1000, appAccount: nil, allowOther: false)
        #expect(odd.options.first == "fsname=/srv/a\\,b\\\\c")
        let bytes = String(hostBytes: Array("/srv/caf".utf8) + [0xE9])
        let raw = MountAccess(source: bytes, ownerUID: 1000, ownerGID: 1000, appAccount: nil, allowOther: false)
        #expect(raw.options.first == "fsname=scopefs")
    }
}
