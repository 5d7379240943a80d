import HostText
import Policy
import Testing

@Suite struct TerminalEscapingTests {
    @Test("SPEC S29, S33a: text output escapes control characters in names as `ls -b` does")
    func escapes() {
        #expect("report.txt".escapedForTerminal == "report.txt")
        #expect("naïve 日本.txt".escapedForTerminal == "naïve 日本.txt")
        #expect("x\n2030\tgrant\u{1B}[31m".escapedForTerminal == #"x\n2030\tgrant\x1b[31m"#)
        #expect("a\u{0}b\u{7F}c\r".escapedForTerminal == #"a\x00b\x7fc\r"#)
        #expect("back\\slash".escapedForTerminal == #"back\\slash"#)
        #expect(
            "csi\u{9B}31m rtl\u{202E}txt.exe line\u{2028}".escapedForTerminal
                == #"csi\u009b31m rtl\u202etxt.exe line\u2028"#)
    }
}
