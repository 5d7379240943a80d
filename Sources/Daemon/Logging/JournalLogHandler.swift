import CSystemd
import Foundation
import Glibc
import Logging

/// A swift-log handler that writes to systemd's journal with structured
/// fields: the message and its priority, the code location, and the
/// logger's metadata as fields of their own, so `journalctl
/// SCOPEFS_APP=com.example.editor` finds one app's denials.
public struct JournalLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    public var logLevel: Logger.Level = .info
    private let identifier: String

    public init(identifier: String = "scopefs") {
        self.identifier = identifier
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        let merged = mergedMetadata(event.metadata)
        Self.send(
            Self.fields(
                level: event.level, message: "\(event.message)", metadata: merged, identifier: identifier,
                file: event.file, function: event.function, line: event.line))
    }

    /// The journal entry of one message, as `FIELD=value` strings.
    static func fields(
        level: Logger.Level, message: String, metadata: Logger.Metadata, identifier: String,
        file: String, function: String, line: UInt
    ) -> [String] {
        var fields = [
            "MESSAGE=\(message)", "PRIORITY=\(level.syslogPriority)", "SYSLOG_IDENTIFIER=\(identifier)",
            "CODE_FILE=\(file)", "CODE_LINE=\(line)", "CODE_FUNC=\(function)",
        ]
        for (key, value) in metadata.sorted(by: { $0.key < $1.key }) {
            fields.append("\(fieldName(key))=\(value)")
        }
        return fields
    }

    /// Metadata keys become journal field names: `errno` is the journal's
    /// own ERRNO field; every other key gets the SCOPEFS_ prefix
    /// (`app` -> SCOPEFS_APP). Field names are upper-case letters, digits
    /// and underscores.
    static func fieldName(_ key: String) -> String {
        if key == "errno" { return "ERRNO" }
        let cleaned = key.uppercased().map { ($0.isASCII && ($0.isLetter || $0.isNumber)) ? $0 : "_" }
        return "SCOPEFS_" + String(cleaned)
    }

    private static func send(_ fields: [String]) {
        let copies = fields.compactMap { strdup($0) }
        defer { copies.forEach { free($0) } }
        let vectors = copies.map { iovec(iov_base: UnsafeMutableRawPointer($0), iov_len: strlen($0)) }
        _ = sd_journal_sendv(vectors, Int32(vectors.count))
    }
}

extension Logger.Level {
    /// syslog's priorities, which the journal uses (`journalctl -p`).
    var syslogPriority: Int {
        switch self {
        case .trace, .debug: 7
        case .info: 6
        case .notice: 5
        case .warning: 4
        case .error: 3
        case .critical: 2
        }
    }
}
