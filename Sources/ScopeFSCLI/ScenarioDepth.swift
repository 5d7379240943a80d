/// How deeply a scenario file nests, measured on its text BEFORE Yams
/// reads it (issue 46, finding 5a). Yams's composer recurses once per
/// level of nesting (`loadNode` → `loadMapping` → `loadNode` ...), and
/// libyaml's scanner keeps a record per level too, so a file nested a few
/// thousand levels deep overflowed the main thread's stack: `scopefs test`
/// died of SIGSEGV instead of exiting 65 (SPEC S34: bad input gets a clear
/// error and a documented exit code, never a crash). A scenario needs
/// four or five levels; the limit is generous and far below what the
/// stack holds.
///
/// The scan errs on the side of counting too much: every block node a line
/// opens (its indentation, each `- ` / `? ` / `: ` indicator that starts
/// it), plus each open flow collection (`[`, `{`; JSON is YAML). It knows
/// what hides brackets and indicators from the parser, so that none of
/// them lets a deep file through: quoted scalars (which may span lines),
/// comments, plain scalars (a `[` inside `prints a[b` is text) and block
/// scalars (`|`, `>`: their content lines are text).
enum ScenarioDepth {
    /// Levels of nesting a scenario file may have (docs/CLI.md).
    static let limit = 64

    /// Throws at the first line where the nesting passes `limit`.
    static func check(_ text: String, limit: Int = limit) throws(ScenarioError) {
        var scan = Scan(limit: limit)
        var line = 1
        var start = text.utf8.startIndex
        let bytes = text.utf8
        while start <= bytes.endIndex {
            let end = bytes[start...].firstIndex(of: UInt8(ascii: "\n")) ?? bytes.endIndex
            try scan.line(Array(bytes[start..<end]), number: line)
            if end == bytes.endIndex { break }
            start = bytes.index(after: end)
            line += 1
        }
    }

    private struct Scan {
        let limit: Int
        /// The block nodes open at the start of a line: their columns, and
        /// whether each is a sequence (a sequence may sit at the column of
        /// its parent mapping's keys: `key:\n- item`).
        var blocks: [(column: Int, sequence: Bool)] = []
        var flowDepth = 0
        var quote: UInt8?
        /// Inside a block scalar: lines indented more than `parent` (and
        /// at least `content`, once its first line set it) are its text.
        var blockScalar: (parent: Int, content: Int?)?

        init(limit: Int) { self.limit = limit }

        private var depth: Int { blocks.count + flowDepth }

        private func check(_ number: Int) throws(ScenarioError) {
            guard depth <= limit else {
                throw ScenarioError(
                    line: number,
                    message: "nested deeper than \(limit) levels, the most a scenario file may have")
            }
        }

        private static func blank(_ byte: UInt8) -> Bool {
            byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") || byte == UInt8(ascii: "\r")
        }

        private static func blankOrEnd(_ bytes: [UInt8], _ index: Int) -> Bool {
            index >= bytes.count || blank(bytes[index])
        }

        mutating func line(_ bytes: [UInt8], number: Int) throws(ScenarioError) {
            var column = 0
            while column < bytes.count, Self.blank(bytes[column]) { column += 1 }
            let empty = column == bytes.count
            if let scalar = blockScalar {
                if empty { return }
                if column > scalar.parent, column >= (scalar.content ?? column) {
                    blockScalar = (scalar.parent, scalar.content ?? column)
                    return
                }
                blockScalar = nil
            }
            var position = 0
            if quote == nil, flowDepth == 0 {
                if empty || bytes[column] == UInt8(ascii: "#") { return }
                position = column
                if column == 0, bytes.count >= 3, Self.blankOrEnd(bytes, 3),
                    bytes[0..<3] == [0x2D, 0x2D, 0x2D] || bytes[0..<3] == [0x2E, 0x2E, 0x2E]
                {
                    // `---` or `...`: a new document starts from nothing.
                    blocks = []
                    position = 3
                    while position < bytes.count, Self.blank(bytes[position]) { position += 1 }
                    if position == bytes.count || bytes[position] == UInt8(ascii: "#") { return }
                }
                try open(bytes, at: &position, indent: column, number: number)
            }
            try scanTokens(bytes, from: position, number: number)
        }

        /// The block nodes this line opens: at its indentation, then one
        /// per indicator (`- - - x` is three sequences and a scalar).
        private mutating func open(
            _ bytes: [UInt8], at position: inout Int, indent: Int, number: Int
        ) throws(ScenarioError) {
            while let last = blocks.last, last.column > indent { blocks.removeLast() }
            let indicators: Set<UInt8> = [UInt8(ascii: "-"), UInt8(ascii: "?"), UInt8(ascii: ":")]
            if !(indicators.contains(bytes[position]) && Self.blankOrEnd(bytes, position + 1)) {
                // A line that is not a sequence's item closes a sequence at
                // its own column (`key:\n- item\nnext: ...`).
                if let last = blocks.last, last.column == indent, last.sequence { blocks.removeLast() }
                if let last = blocks.last, last.column == indent {
                    return
                }
                blocks.append((indent, false))
                try check(number)
                return
            }
            func indicator(_ at: Int) -> Bool {
                at < bytes.count && indicators.contains(bytes[at]) && Self.blankOrEnd(bytes, at + 1)
            }
            while indicator(position) {
                if let last = blocks.last, last.column == position, last.sequence {
                    // The next item of a sequence already open.
                } else {
                    blocks.append((position, true))
                    try check(number)
                }
                position += 1
                while position < bytes.count, Self.blank(bytes[position]) { position += 1 }
                if position == bytes.count || bytes[position] == UInt8(ascii: "#") { return }
                if indicator(position) { continue }
                // The item's own node (a mapping's first key, a scalar).
                blocks.append((position, false))
                try check(number)
            }
        }

        /// Flow collections, quotes, comments and block scalars on the
        /// rest of the line.
        private mutating func scanTokens(_ bytes: [UInt8], from start: Int, number: Int) throws(ScenarioError) {
            var index = start
            var tokenStart = true
            var afterQuote = false
            while index < bytes.count {
                let byte = bytes[index]
                if let open = quote {
                    if open == UInt8(ascii: "\"") {
                        if byte == UInt8(ascii: "\\") {
                            index += 2
                            continue
                        }
                        if byte == open { quote = nil }
                    } else if byte == open {
                        if index + 1 < bytes.count, bytes[index + 1] == open {
                            index += 2
                            continue
                        }
                        quote = nil
                    }
                    if quote == nil {
                        tokenStart = false
                        afterQuote = true
                    }
                    index += 1
                    continue
                }
                let inFlow = flowDepth > 0
                switch byte {
                case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\r"):
                    index += 1
                    continue
                case UInt8(ascii: "#") where index == 0 || Self.blank(bytes[index - 1]):
                    return
                case UInt8(ascii: "\""), UInt8(ascii: "'"):
                    if tokenStart { quote = byte }
                    tokenStart = false
                case UInt8(ascii: "["), UInt8(ascii: "{"):
                    if tokenStart || inFlow {
                        flowDepth += 1
                        try check(number)
                        tokenStart = true
                        afterQuote = false
                        index += 1
                        continue
                    }
                case UInt8(ascii: "]"), UInt8(ascii: "}"):
                    if inFlow {
                        flowDepth -= 1
                        tokenStart = false
                        afterQuote = false
                        index += 1
                        continue
                    }
                    tokenStart = false
                case UInt8(ascii: ","):
                    if inFlow {
                        tokenStart = true
                        afterQuote = false
                        index += 1
                        continue
                    }
                    tokenStart = false
                case UInt8(ascii: ":"):
                    let next = index + 1 < bytes.count ? bytes[index + 1] : nil
                    let flowNext = next.map { [0x2C, 0x5B, 0x5D, 0x7B, 0x7D].contains($0) } ?? true
                    if Self.blankOrEnd(bytes, index + 1) || (inFlow && (afterQuote || flowNext)) {
                        tokenStart = true
                        afterQuote = false
                        index += 1
                        continue
                    }
                    tokenStart = false
                case UInt8(ascii: "!"), UInt8(ascii: "&"):
                    if tokenStart {
                        // A tag or an anchor: the node itself follows it.
                        while index < bytes.count, !Self.blank(bytes[index]) { index += 1 }
                        continue
                    }
                    tokenStart = false
                case UInt8(ascii: "|"), UInt8(ascii: ">"):
                    if tokenStart && !inFlow {
                        blockScalar = (blocks.last?.column ?? 0, nil)
                        return
                    }
                    tokenStart = false
                default:
                    tokenStart = false
                }
                afterQuote = false
                index += 1
            }
        }
    }
}
