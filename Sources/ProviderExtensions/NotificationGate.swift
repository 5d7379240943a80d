import Logging

/// The extension's notifications (`changed`, `$/progress`, `log`), at
/// most `notificationsPerSecond` of them passed on; the excess is dropped
/// and reported (an event a second at most). A dropped `$/progress` still
/// counts as a sign of life for the stall limit: only the callbacks are
/// spared, the request is alive. Owned by the stdout reader thread.
struct NotificationGate {
    let context: HostContext
    private var limit: RateLimit
    private var dropped = DropCounter()

    init(context: HostContext) {
        self.context = context
        limit = RateLimit(rate: context.tunables.notificationsPerSecond)
    }

    mutating func handle(_ method: String, _ params: JSONValue, signOfLife: (Int64) -> RequestControl?) {
        let now = MonotonicClock.now
        let allowed = limit.allow(now: now)
        if !allowed { dropped.dropped() }
        switch method {
        case "$/progress":
            guard let id = params["id"]?.int, let control = signOfLife(id), allowed else { break }
            if let completed = params["completed"]?.int, let total = params["total"]?.int {
                control.onProgress?(completed, total)
                if let onStaged = control.onStaged, let staged = params["staged"],
                    let path = staged["path"]?.string, let offset = staged["offset"]?.int, offset >= 0, completed >= 0,
                    let descriptor = context.openStaged(path)
                {
                    onStaged(StagedPrefix(descriptor: descriptor, offset: offset, length: completed))
                }
            }
        case "changed" where allowed:
            context.changed()
        case "log" where allowed:
            let text = params["message"]?.string ?? ""
            let message = String(decoding: text.utf8.prefix(context.tunables.stderrLineLimit), as: UTF8.self)
            context.logger.log(
                level: Self.level(params["level"]?.string), "\(message)",
                metadata: ["provider": "\(context.providerID)"])
        default:
            break  // unknown notifications are ignored (docs/PROVIDERS.md, "Versions")
        }
        reportDropped(now: now)
    }

    mutating func reportDropped(now: UInt64 = MonotonicClock.now, force: Bool = false) {
        if let count = dropped.due(now: now, force: force) {
            context.emit(.notificationsDropped(count: count))
        }
    }

    static func level(_ name: String?) -> Logger.Level {
        switch name {
        case "debug": .debug
        case "warning": .warning
        case "error": .error
        default: .info
        }
    }
}

/// The extension's stderr into the daemon's log under the provider's name:
/// lines cut at `stderrLineLimit` bytes, at most `stderrLinesPerSecond`
/// of them (the excess dropped, counted, reported once a second).
struct ExtensionLog {
    let context: HostContext

    func follow(_ stderr: WakeablePipe) {
        let tunables = context.tunables
        var splitter = LineSplitter(limit: tunables.stderrLineLimit)
        var limit = RateLimit(rate: tunables.stderrLinesPerSecond, burst: max(tunables.stderrLinesPerSecond, 20))
        var dropped = DropCounter()
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 16384, alignment: 8)
        defer { buffer.deallocate() }
        func log(_ bytes: [UInt8], cut: Bool) {
            let now = MonotonicClock.now
            guard limit.allow(now: now) else {
                dropped.dropped()
                return
            }
            if let count = dropped.due(now: now) { report(count) }
            let text = String(decoding: bytes, as: UTF8.self) + (cut ? " [cut]" : "")
            context.logger.info("\(text)", metadata: ["provider": "\(context.providerID)", "stream": "stderr"])
        }
        while true {
            let read = stderr.read(into: buffer, idle: 1000)
            if case .idle = read {
                // A burst that ended: its drops are told now, not at the next line.
                if let count = dropped.due() { report(count) }
                continue
            }
            guard case .bytes(let count) = read else { break }
            let bytes = UnsafeBufferPointer(
                start: buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), count: count)
            for piece in splitter.feed(bytes) {
                switch piece {
                case .line(let line): log(line, cut: false)
                case .tooLong(let start): log(start, cut: true)
                }
            }
        }
        if let rest = splitter.rest() { log(rest, cut: false) }
        if let count = dropped.due(force: true) { report(count) }
    }

    private func report(_ count: Int) {
        context.logger.warning(
            "\(count) lines of the extension's stderr dropped (rate limit)",
            metadata: ["provider": "\(context.providerID)"])
        context.emit(.logLinesDropped(count: count))
    }
}
