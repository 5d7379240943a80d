import Glibc

/// docs/PROVIDERS.md's framing: one JSON-RPC 2.0 object per line, `\n`
/// ended, at most `lineLimit` bytes. What the extension writes is sorted
/// into `IncomingMessage`s or refused as a violation with its reason.
enum IncomingMessage {
    case response(id: Int64, answer: Result<JSONValue, ExtensionFailure>)
    /// A response with `id: null`: the extension could not read one of our
    /// lines (a daemon bug, recorded, not the extension's fault).
    case unattributedError(ExtensionFailure)
    case notification(method: String, params: JSONValue)
    case violation(String)

    init(line: [UInt8]) {
        guard let message = JSONValue.parse(line) else {
            self = .violation("not JSON (or not UTF-8)")
            return
        }
        guard message.isObject, message["jsonrpc"] == .string("2.0") else {
            self = .violation("not a JSON-RPC 2.0 object")
            return
        }
        if let method = message["method"] {
            guard let name = method.string else {
                self = .violation("a method that is not a string")
                return
            }
            if let id = message["id"], !id.isNull {
                self = .violation("a request from the extension (\(name)): version 1.0 has none")
                return
            }
            self = .notification(method: name, params: message["params"] ?? .object([:]))
            return
        }
        self = Self.response(message)
    }

    private static func response(_ message: JSONValue) -> IncomingMessage {
        let result = message["result"]
        let error = message["error"]
        guard (result == nil) != (error == nil) else {
            return .violation("a response needs exactly one of result and error")
        }
        var answer: Result<JSONValue, ExtensionFailure>
        if let result {
            answer = .success(result)
        } else {
            guard let failure = ExtensionFailure(errorObject: error!) else {
                return .violation("an error that is not {code: integer, message: string}")
            }
            answer = .failure(failure)
        }
        switch message["id"] {
        case .int(let id)?: return .response(id: id, answer: answer)
        case .null?:
            if case .failure(let failure) = answer { return .unattributedError(failure) }
            return .violation("a result for id null")
        default: return .violation("a response whose id is not one the daemon sent")
        }
    }
}

extension ExtensionFailure {
    /// A JSON-RPC error object; codes this version does not know are
    /// handled as `internal` (docs/PROVIDERS.md, "Versions"), their number
    /// kept in the message.
    init?(errorObject: JSONValue) {
        guard let code = errorObject["code"]?.int, let message = errorObject["message"]?.string else { return nil }
        let known = Int(exactly: code).flatMap(ExtensionErrorCode.init(rawValue:))
        self.init(known ?? .internalError, known == nil ? "error \(code): \(message)" : message)
        let data = errorObject["data"]
        if self.code == .conflict {
            currentVersion = data?["version"]?.string ?? data?["current"]?["version"]?["content"]?.string
        }
        if self.code == .busy, let seconds = data?["retryAfter"]?.number, seconds >= 0 {
            retryAfter = seconds
        }
    }
}

enum OutgoingMessage {
    static func request(id: Int64, method: String, params: JSONValue) -> [UInt8] {
        JSONValue.object(["jsonrpc": .string("2.0"), "id": .int(id), "method": .string(method), "params": params])
            .encoded + [UInt8(ascii: "\n")]
    }

    static func notification(_ method: String, _ params: JSONValue) -> [UInt8] {
        JSONValue.object(["jsonrpc": .string("2.0"), "method": .string(method), "params": params]).encoded
            + [UInt8(ascii: "\n")]
    }
}

/// Splits a byte stream into lines of at most `limit` bytes (without the
/// `\n`). What happens to a longer line is the caller's choice: stdout
/// ends the extension, stderr cuts the line.
struct LineSplitter {
    let limit: Int
    private var partial: [UInt8] = []
    /// Bytes of the current line dropped after the limit (stderr's cut).
    private(set) var droppingRest = false

    init(limit: Int) {
        self.limit = limit
    }

    enum Piece {
        case line([UInt8])
        /// A line longer than the limit: its first `limit` bytes.
        case tooLong([UInt8])
    }

    /// Feeds `bytes`; returns the finished lines, and a line that passed
    /// the limit (once per long line; its rest is skipped up to its `\n`).
    mutating func feed(_ bytes: UnsafeBufferPointer<UInt8>) -> [Piece] {
        var pieces: [Piece] = []
        var start = 0
        while start < bytes.count {
            let newline = bytes[start...].firstIndex(of: UInt8(ascii: "\n"))
            let end = newline ?? bytes.count
            if !droppingRest {
                partial.append(contentsOf: bytes[start..<end])
                if partial.count > limit {
                    pieces.append(.tooLong(Array(partial.prefix(limit))))
                    partial = []
                    droppingRest = true
                }
            }
            if newline != nil {
                if !droppingRest { pieces.append(.line(partial)) }
                partial = []
                droppingRest = false
            }
            start = end + 1
        }
        return pieces
    }

    /// What is left without a final `\n` at end of file.
    mutating func rest() -> [UInt8]? {
        defer { partial = [] }
        return partial.isEmpty || droppingRest ? nil : partial
    }
}

/// Blocking reads and writes on a pipe that a second, "wake" pipe can
/// interrupt: the connection's threads leave when it ends even if a
/// grandchild of the extension holds the other end open.
struct WakeablePipe {
    let descriptor: Int32
    let wake: Int32

    enum ReadResult {
        case bytes(Int)
        case endOfFile
        case woken
        /// Nothing arrived within the idle time given.
        case idle
    }

    /// Reads what is there; waits at most `idle` milliseconds (-1: no limit).
    func read(into buffer: UnsafeMutableRawBufferPointer, idle: Int32 = -1) -> ReadResult {
        while true {
            switch waitFor(Int16(POLLIN), timeout: idle) {
            case .woken: return .woken
            case .endOfFile: return .endOfFile
            case .idle: return .idle
            case .bytes:
                let count = Glibc.read(descriptor, buffer.baseAddress, buffer.count)
                if count > 0 { return .bytes(count) }
                if count == 0 { return .endOfFile }
                if errno == EINTR || errno == EAGAIN { continue }
                return .endOfFile
            }
        }
    }

    /// Writes all of `bytes` (the descriptor is non-blocking); false when
    /// the reader is gone or the pipe was woken.
    func write(_ bytes: [UInt8]) -> Bool {
        var written = 0
        while written < bytes.count {
            let count = bytes.withUnsafeBytes {
                Glibc.write(descriptor, $0.baseAddress! + written, bytes.count - written)
            }
            if count > 0 {
                written += count
                continue
            }
            if count < 0 && errno == EINTR { continue }
            guard count < 0 && errno == EAGAIN else { return false }
            guard case .bytes = waitFor(Int16(POLLOUT)) else { return false }
        }
        return true
    }

    private func waitFor(_ events: Int16, timeout: Int32 = -1) -> ReadResult {
        var fds = [
            pollfd(fd: descriptor, events: events, revents: 0), pollfd(fd: wake, events: Int16(POLLIN), revents: 0),
        ]
        while true {
            let ready = poll(&fds, 2, timeout)
            if ready < 0 && errno == EINTR { continue }
            if ready == 0 { return .idle }
            if ready < 0 || fds[1].revents != 0 { return .woken }
            if fds[0].revents & events != 0 { return .bytes(0) }
            return .endOfFile  // POLLHUP or POLLERR without data
        }
    }
}
