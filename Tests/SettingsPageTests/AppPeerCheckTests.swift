import NIOCore
import Testing

@testable import SettingsPage

/// The peer check's reading of /proc/net/tcp (the live check runs in
/// Tests/integration/test_settings_page.py).
@Suite struct AppPeerCheckTests {
    @Test func testAddressesAreWrittenAsTheKernelWritesThem() throws {
        let address = try SocketAddress(ipAddress: "127.0.0.1", port: 8080)
        #expect(AppPeerCheck.procKey(address) == "0100007F:1F90")
    }

    @Test func testTheClientsEndOfAConnectionIsFound() {
        let table = """
              sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
               0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 111 1
               1: 0100007F:1F90 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 222 1
               2: 0100007F:D431 0100007F:1F90 01 00000000:00000000 00:00000000 00000000   998        0 333 1
            """
        #expect(
            AppPeerCheck.find(in: table, local: "0100007F:D431", remote: "0100007F:1F90")
                == AppPeerCheck.SocketOwner(uid: 998, inode: 333))
        #expect(AppPeerCheck.find(in: table, local: "0100007F:D432", remote: "0100007F:1F90") == nil)
    }
}
