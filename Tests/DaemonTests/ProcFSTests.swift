import Glibc
import Processes
import Testing

@testable import Daemon

@Suite struct ProcFSTests {
    @Test("SPEC S5, S36: a status file gives the process, its parent and the real uid")
    func status() {
        let text =
            "Name:\tsh\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t4242\nNgid:\t0\nPid:\t4243\nPPid:\t17\n"
            + "TracerPid:\t0\nUid:\t1000\t0\t0\t0\nGid:\t1000\t1000\t1000\t1000\n"
        let parsed = ProcFS.parseStatus(Array(text.utf8))
        #expect(parsed?.tgid == 4242)
        #expect(parsed?.parent == 17)
        #expect(parsed?.uid == 1000)
        #expect(ProcFS.parseStatus(Array("Name:\tsh\nTgid:\t1\n".utf8)) == nil)
        #expect(ProcFS.parseStatus(Array("Tgid:\t99999999999\nPPid:\t1\nUid:\t0\n".utf8)) == nil)
    }

    @Test("SPEC S36: the start time is field 22, counted after a command name with spaces and parentheses")
    func startTime() {
        let fields = (3...21).map { "\($0)" }.joined(separator: " ")
        let text = "77 (a) b) (c) " + fields + " 123456 23 24\n"
        #expect(ProcFS.parseStartTime(Array(text.utf8)) == 123_456)
        #expect(ProcFS.parseStartTime(Array("77 (truncated".utf8)) == nil)
    }

    @Test("SPEC S5: the cgroup v2 line, whatever v1 lines come first")
    func cgroup() {
        let text = "12:cpuset:/\n1:name=systemd:/user.slice\n0::/user.slice/scopefs-run-1-2\n"
        #expect(ProcFS.parseCgroup2Path(Array(text.utf8)) == "/user.slice/scopefs-run-1-2")
        #expect(ProcFS.parseCgroup2Path(Array("1:name=systemd:/\n".utf8)) == nil)
    }

    @Test("SPEC S5: a sandbox's command is the last NSpid number, 2; ignored signals are the SigIgn mask")
    func namespacePidAndIgnoredSignals() {
        let text = "Name:\tpython3\nNSpid:\t41007\t2\nSigQ:\t0/63\nSigIgn:\t0000000000004003\n"
        #expect(ProcFS.parseInnermostPid(Array(text.utf8)) == 2)
        #expect(ProcFS.parseInnermostPid(Array("Name:\tsh\nNSpid:\t17\n".utf8)) == 17)
        #expect(ProcFS.parseInnermostPid(Array("Name:\tsh\n".utf8)) == nil)
        // SIGHUP (bit 0), SIGINT (bit 1) and SIGTERM (bit 14).
        #expect(ProcFS.parseIgnoredSignals(Array(text.utf8)) == 1 << 0 | 1 << 1 | 1 << 14)
        #expect(ProcFS.parseIgnoredSignals(Array("Name:\tsh\n".utf8)) == nil)
        #expect(ProcFS.innermostPid(of: getpid()) != nil)
        #expect(ProcFS.processes().contains(getpid()))
    }

    @Test("The readers agree with the kernel's view of this test process")
    func readsThisProcess() {
        let me = ProcFS.status(of: getpid())
        #expect(me?.tgid == getpid())
        #expect(me?.parent == getppid())
        #expect(me?.uid == getuid())
        #expect(ProcFS.startTime(of: getpid()) != nil)
    }
}
