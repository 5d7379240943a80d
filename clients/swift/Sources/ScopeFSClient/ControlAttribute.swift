/// The control attributes of the ScopeFS syscall API (docs/API.md, SPEC S12).
///
/// Reading one of them with getxattr(2) on a path inside the mount performs
/// the action and returns its outcome as ASCII without a trailing NUL.
/// The getxattr forms are used rather than setxattr because the kernel lets
/// any caller that may read a file read its `user.` attributes, while
/// setxattr also needs write permission on the mode bits (docs/API.md).
enum ControlAttribute: String, Sendable {
    /// Start accessing (SPEC S6): replies with the new counter or `not-needed`.
    case start = "user.scopefs.start"
    /// Stop accessing (SPEC S7): replies with the new counter, `unbalanced`
    /// or `not-needed`.
    case stop = "user.scopefs.stop"
    /// The caller's own counter on the nearest active grant covering the
    /// path (SPEC S12): a decimal (`0` when none) or `not-needed`.
    case scope = "user.scopefs.scope"
}

/// One reply of the control attributes (docs/API.md, "Starting and stopping access").
enum ControlReply: Equatable, Sendable {
    /// A counter value: the new counter after a start or stop, or the
    /// current counter for `user.scopefs.scope`.
    case counter(Int)
    /// The path needs no scope: a container path or anything else outside
    /// provider items (SPEC S9). Not an error.
    case notNeeded
    /// A stop with the counter already at zero (SPEC S7); recorded by the
    /// daemon as an event, not an error.
    case unbalanced

    /// Parses the raw attribute value. Tolerates a trailing NUL or newline
    /// and surrounding spaces; returns nil for anything else.
    init?(_ bytes: some Collection<UInt8>) {
        var text = String(decoding: bytes, as: UTF8.self)
        while let last = text.last, last == "\0" || last.isWhitespace { text.removeLast() }
        while let first = text.first, first.isWhitespace { text.removeFirst() }
        switch text {
        case "not-needed": self = .notNeeded
        case "unbalanced": self = .unbalanced
        default:
            guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                let value = Int(text)
            else { return nil }
            self = .counter(value)
        }
    }
}
