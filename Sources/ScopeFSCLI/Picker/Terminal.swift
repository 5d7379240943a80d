import CommandErrors
import Glibc
import PolicyStore

/// The picker's terminal: raw mode (termios), the alternate screen, key
/// reading with escape sequences, and ANSI output. Everything that touches
/// the terminal is here; the picker's model, view and controller are pure.
///
/// The terminal is restored on every way out: `restore()` (called by the
/// picker on return and on errors), an `atexit` handler, and handlers for
/// the signals that end the process (SIGTERM, SIGHUP, ..., and crashes,
/// whose previous handler, such as Swift's backtracer, runs afterwards).
final class Terminal {
    let input: Int32
    let output: Int32
    private let closeOutput: Bool
    /// SIGWINCH writes a byte here, so that a resize wakes `readKey()`.
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private var restored = false

    static func isTerminal(_ descriptor: Int32) -> Bool { isatty(descriptor) == 1 }

    /// What the environment lets the picker use: `TERM=dumb` moves no
    /// cursor; `NO_COLOR` (no-color.org) or a dumb terminal wants no colour.
    /// Reverse video and bold are not colour: they still mark the selection.
    struct Capabilities {
        var canMoveCursor: Bool
        var usesColor: Bool

        static var current: Capabilities {
            let term = getenv("TERM").map { String(cString: $0) } ?? ""
            let noColor = getenv("NO_COLOR").map { String(cString: $0) }.map { !$0.isEmpty } ?? false
            return Capabilities(canMoveCursor: term != "dumb", usesColor: !noColor && term != "dumb")
        }
    }

    private let capabilities = Capabilities.current

    /// Enters raw mode and the alternate screen. `input` must be a terminal;
    /// the picker is drawn on standard output if it is a terminal, else on
    /// standard error, else on /dev/tty (so that the result can be piped).
    init(input: Int32 = 0) throws(CommandError) {
        let output: Int32
        let closeOutput: Bool
        if Self.isTerminal(1) {
            (output, closeOutput) = (1, false)
        } else if Self.isTerminal(2) {
            (output, closeOutput) = (2, false)
        } else {
            let tty = open("/dev/tty", O_WRONLY | O_CLOEXEC)
            guard tty >= 0 else { throw CommandError(.usage, "pick needs a terminal to draw on") }
            (output, closeOutput) = (tty, true)
        }
        var pipeEnds: [Int32] = [-1, -1]
        guard pipe(&pipeEnds) == 0 else {
            let reason = String(cString: strerror(errno))
            if closeOutput { close(output) }
            throw CommandError(.ioError, "cannot create a pipe: \(reason)")
        }
        for end in pipeEnds {
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
            _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK)
        }
        self.input = input
        self.output = output
        self.closeOutput = closeOutput
        (wakeRead, wakeWrite) = (pipeEnds[0], pipeEnds[1])

        guard tcgetattr(input, SignalSafe.saved) == 0 else {
            let reason = String(cString: strerror(errno))
            restore()
            throw CommandError(.usage, "cannot read the terminal's settings: \(reason)")
        }
        SignalSafe.descriptors[0] = input
        SignalSafe.descriptors[1] = output
        SignalSafe.descriptors[2] = wakeWrite
        SignalSafe.installHandlers()

        var raw = SignalSafe.saved.pointee
        cfmakeraw(&raw)
        SignalSafe.active.pointee = 1
        guard tcsetattr(input, TCSANOW, &raw) == 0 else {
            let reason = String(cString: strerror(errno))
            restore()
            throw CommandError(.usage, "cannot put the terminal in raw mode: \(reason)")
        }
        // Alternate screen, hidden cursor, cleared screen.
        write("\u{1B}[?1049h\u{1B}[?25l\u{1B}[H\u{1B}[2J")
    }

    deinit { restore() }

    /// Leaves the alternate screen and restores the terminal's settings and
    /// the previous signal handlers. Idempotent.
    func restore() {
        guard !restored else { return }
        restored = true
        SignalSafe.restoreTerminal()
        SignalSafe.uninstallHandlers()
        closeDescriptors()
    }

    private func closeDescriptors() {
        close(wakeRead)
        close(wakeWrite)
        if closeOutput { close(output) }
    }

    /// Columns and rows; 80x24 if the terminal does not say.
    func size() -> (width: Int, height: Int) {
        for descriptor in [output, input] {
            var size = winsize()
            if ioctl(descriptor, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0, size.ws_row > 0 {
                return (Int(size.ws_col), Int(size.ws_row))
            }
        }
        return (80, 24)
    }

    /// Draws whole lines from the top left, without clearing first (no
    /// flicker); each line is already as wide as the screen.
    func draw(_ lines: [ScreenLine]) {
        var text = ""
        for (row, line) in lines.enumerated() {
            text += "\u{1B}[\(row + 1);1H" + sequence(for: line.style) + line.text + "\u{1B}[0m\u{1B}[K"
        }
        write(text)
    }

    /// Clears the screen (after a resize, old text may lie outside the new lines).
    func clear() { write("\u{1B}[0m\u{1B}[H\u{1B}[2J") }

    private func sequence(for style: ScreenLine.Style) -> String {
        switch style {
        case .plain: return ""
        case .title, .highlighted: return "\u{1B}[7m"
        case .location, .question: return "\u{1B}[1m"
        case .dim: return "\u{1B}[2m"
        case .message: return capabilities.usesColor ? "\u{1B}[33m" : "\u{1B}[1m"
        }
    }

    private func write(_ text: String) {
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let written = bytes.withUnsafeBytes { Glibc.write(output, $0.baseAddress, $0.count) }
            if written < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                return
            }
            bytes = bytes.dropFirst(written)
        }
    }

    // MARK: Keys

    /// Blocks until a key is pressed, the terminal is resized (`.resize`) or
    /// the input ends (`.endOfInput`).
    func readKey() -> Key {
        while true {
            var descriptors = [
                pollfd(fd: input, events: Int16(POLLIN), revents: 0),
                pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0),
            ]
            let ready = poll(&descriptors, 2, -1)
            if ready < 0 {
                if errno == EINTR { continue }
                return .endOfInput
            }
            if descriptors[1].revents != 0 {
                var drain = [UInt8](repeating: 0, count: 64)
                while read(wakeRead, &drain, drain.count) > 0 {}
                return .resize
            }
            guard descriptors[0].revents != 0 else { continue }
            guard let first = readByte(timeout: -1) else { return .endOfInput }
            return KeyDecoder.decode(readSequence(startingWith: first))
        }
    }

    /// The rest of an escape sequence or UTF-8 character. A lone ESC is the
    /// Escape key: nothing follows it within 50 ms.
    private func readSequence(startingWith first: UInt8) -> [UInt8] {
        var bytes = [first]
        if first == 0x1B {
            guard let introducer = readByte(timeout: 50) else { return bytes }
            bytes.append(introducer)
            if introducer == UInt8(ascii: "O") {
                if let final = readByte(timeout: 50) { bytes.append(final) }
            } else if introducer == UInt8(ascii: "[") {
                while bytes.count < 16, let next = readByte(timeout: 50) {
                    bytes.append(next)
                    if KeyDecoder.isFinalCSIByte(next) { break }
                }
            }
        } else if first >= 0x80 {
            for _ in 1..<KeyDecoder.utf8Length(startingWith: first) {
                guard let next = readByte(timeout: 50) else { break }
                bytes.append(next)
            }
        }
        return bytes
    }

    /// One byte of input, waiting at most `timeout` ms (-1: forever); nil
    /// on timeout or end of input.
    private func readByte(timeout: Int32) -> UInt8? {
        while true {
            var descriptor = pollfd(fd: input, events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptor, 1, timeout)
            if ready < 0 && errno == EINTR { continue }
            guard ready > 0 else { return nil }
            var byte: UInt8 = 0
            let count = read(input, &byte, 1)
            if count < 0 && (errno == EINTR || errno == EAGAIN) { continue }
            return count == 1 ? byte : nil
        }
    }
}

/// What the signal handlers use: raw memory allocated once, so that a
/// handler makes only async-signal-safe calls (tcsetattr, write, sigaction,
/// raise) and no Swift runtime calls that could allocate or lock.
private enum SignalSafe {
    nonisolated(unsafe) static let saved = UnsafeMutablePointer<termios>.allocate(capacity: 1)
    /// 1 while the terminal is raw.
    nonisolated(unsafe) static let active: UnsafeMutablePointer<sig_atomic_t> = {
        let pointer = UnsafeMutablePointer<sig_atomic_t>.allocate(capacity: 1)
        pointer.initialize(to: 0)
        return pointer
    }()
    /// input, output, the wake pipe's write end.
    nonisolated(unsafe) static let descriptors: UnsafeMutablePointer<Int32> = {
        let pointer = UnsafeMutablePointer<Int32>.allocate(capacity: 3)
        pointer.initialize(repeating: -1, count: 3)
        return pointer
    }()
    nonisolated(unsafe) static let previous = UnsafeMutablePointer<sigaction>.allocate(capacity: 65)
    nonisolated(unsafe) static let installed: UnsafeMutablePointer<Bool> = {
        let pointer = UnsafeMutablePointer<Bool>.allocate(capacity: 65)
        pointer.initialize(repeating: false, count: 65)
        return pointer
    }()
    /// Shown cursor, plain style, main screen.
    nonisolated(unsafe) static let leave: UnsafeMutableBufferPointer<UInt8> = {
        let bytes = Array("\u{1B}[0m\u{1B}[?25h\u{1B}[?1049l".utf8)
        let buffer = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: bytes.count)
        _ = buffer.initialize(from: bytes)
        return buffer
    }()
    nonisolated(unsafe) static var atExitRegistered = false

    /// The signals whose default action ends the process.
    static let fatal: [Int32] = [
        SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGALRM, SIGUSR1, SIGUSR2, SIGPIPE, SIGXCPU, SIGXFSZ,
        SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP,
    ]

    static func installHandlers() {
        // Every buffer is initialised here, not lazily inside a handler.
        _ = (saved, active, descriptors, previous, installed, leave)
        if !atExitRegistered {
            atExitRegistered = true
            atexit { SignalSafe.restoreTerminal() }
        }
        for signal in fatal {
            var action = sigaction()
            action.__sigaction_handler.sa_handler = { signal in
                SignalSafe.restoreTerminal()
                // Then what would have happened without the picker.
                sigaction(signal, SignalSafe.previous + Int(signal), nil)
                raise(signal)
            }
            sigemptyset(&action.sa_mask)
            action.sa_flags = 0
            install(signal, &action)
        }
        var resize = sigaction()
        resize.__sigaction_handler.sa_handler = { _ in
            let saved = errno
            var byte: UInt8 = 1
            _ = write(SignalSafe.descriptors[2], &byte, 1)
            errno = saved
        }
        sigemptyset(&resize.sa_mask)
        resize.sa_flags = SA_RESTART
        install(SIGWINCH, &resize)
    }

    /// Installs `action` unless the signal was ignored (say, SIGHUP under
    /// nohup): an ignored signal stays ignored.
    private static func install(_ signal: Int32, _ action: inout sigaction) {
        guard sigaction(signal, nil, previous + Int(signal)) == 0 else { return }
        if signal != SIGWINCH, unsafeBitCast(previous[Int(signal)].__sigaction_handler.sa_handler, to: Int.self) == 1 {
            return  // SIG_IGN
        }
        installed[Int(signal)] = sigaction(signal, &action, nil) == 0
    }

    static func uninstallHandlers() {
        for signal in fatal + [SIGWINCH] where installed[Int(signal)] {
            sigaction(signal, previous + Int(signal), nil)
            installed[Int(signal)] = false
        }
    }

    /// Async-signal-safe; does nothing unless the terminal is raw.
    static func restoreTerminal() {
        guard active.pointee == 1 else { return }
        active.pointee = 0
        _ = write(descriptors[1], leave.baseAddress, leave.count)
        _ = tcsetattr(descriptors[0], TCSANOW, saved)
    }
}
