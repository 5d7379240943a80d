import CPortalBus
import Glibc
import HostText

/// The options of a FileChooser call (xdg-desktop-portal's
/// org.freedesktop.impl.portal.FileChooser), read with their types
/// checked: an option of the wrong type is refused (InvalidArgument), not
/// ignored, so a caller never gets a pick other than the one it described.
/// Options ScopeFS has no use for (modal, accept_label, choices) are
/// skipped whatever they hold.
struct ChooserOptions {
    /// A filter: a name and its patterns, each a glob (0) or a MIME type (1).
    struct Filter {
        var name: String
        var patterns: [(kind: UInt32, pattern: String)]
    }

    var multiple = false
    var directory = false
    var filters: [Filter] = []
    var currentFilter: Filter?
    var currentFolder: String?
    var currentName: String?
    var currentFile: String?
    /// SaveFiles: the names of the files to save.
    var files: [String] = []

    init(_ arguments: ArgumentReader) throws(PortalError) {
        try arguments.dictionary { (key) throws(PortalError) in
            switch key {
            case "multiple":
                multiple = try arguments.variant(key, "b") { () throws(PortalError) in try arguments.bool() }
            case "directory":
                directory = try arguments.variant(key, "b") { () throws(PortalError) in try arguments.bool() }
            case "filters":
                filters = try arguments.variant(key, "a(sa(us))") { () throws(PortalError) in
                    try arguments.array("(sa(us))") { () throws(PortalError) in try Self.filter(arguments) }
                }
            case "current_filter":
                currentFilter = try arguments.variant(key, "(sa(us))") { () throws(PortalError) in
                    try Self.filter(arguments)
                }
            case "current_folder":
                currentFolder = try arguments.variant(key, "ay") { () throws(PortalError) in try arguments.path() }
            case "current_name":
                currentName = try arguments.variant(key, "s") { () throws(PortalError) in try arguments.string() }
            case "current_file":
                currentFile = try arguments.variant(key, "ay") { () throws(PortalError) in try arguments.path() }
            case "files":
                files = try arguments.variant(key, "aay") { () throws(PortalError) in
                    try arguments.array("ay") { () throws(PortalError) in try arguments.path() }
                }
            default:
                try arguments.skipVariant()
            }
        }
    }

    private static func filter(_ arguments: ArgumentReader) throws(PortalError) -> Filter {
        try arguments.structure("sa(us)") { () throws(PortalError) in
            let name = try arguments.string()
            let patterns = try arguments.array("(us)") { () throws(PortalError) in
                try arguments.structure("us") { () throws(PortalError) in
                    (kind: try arguments.uint32(), pattern: try arguments.string())
                }
            }
            for pattern in patterns where pattern.kind > 1 {
                throw .invalidArgument(
                    "filter \(name): pattern kind \(pattern.kind) is neither 0 (glob) nor 1 (MIME type)")
            }
            return Filter(name: name, patterns: patterns)
        }
    }
}

extension ArgumentReader {
    private func enter(_ kind: Character, _ contents: String) throws(PortalError) -> Bool {
        let result = sd_bus_message_enter_container(message, CChar(kind.asciiValue!), contents)
        if result < 0 { throw .invalidArgument("malformed arguments (\(String(cString: strerror(-result))))") }
        return result > 0
    }

    private func exit() throws(PortalError) {
        let result = sd_bus_message_exit_container(message)
        if result < 0 { throw .invalidArgument("malformed arguments (\(String(cString: strerror(-result))))") }
    }

    /// An `a{sv}`: `entry` reads each value (a variant) after its key.
    func dictionary(_ entry: (String) throws(PortalError) -> Void) throws(PortalError) {
        _ = try enter("a", "{sv}")
        while try enter("e", "sv") {
            try entry(try string())
            try exit()
        }
        try exit()
    }

    /// The variant of option `key`, which must hold `signature`.
    func variant<Value>(_ key: String, _ signature: String, _ read: () throws(PortalError) -> Value)
        throws(PortalError) -> Value
    {
        var contents: UnsafePointer<CChar>?
        let result = sd_bus_message_peek_type(message, nil, &contents)
        let held = contents.map { String(cString: $0) } ?? "?"
        guard result > 0, held == signature else {
            throw .invalidArgument("option \(key) must be of type \(signature), not \(held)")
        }
        _ = try enter("v", signature)
        let value = try read()
        try exit()
        return value
    }

    func skipVariant() throws(PortalError) {
        let result = sd_bus_message_skip(message, "v")
        if result < 0 { throw .invalidArgument("malformed arguments (\(String(cString: strerror(-result))))") }
    }

    func array<Element>(_ element: String, _ read: () throws(PortalError) -> Element) throws(PortalError) -> [Element] {
        _ = try enter("a", element)
        var elements: [Element] = []
        while true {
            var type: CChar = 0
            let result = sd_bus_message_peek_type(message, &type, nil)
            if result < 0 { throw .invalidArgument("malformed arguments (\(String(cString: strerror(-result))))") }
            if result == 0 { break }
            elements.append(try read())
        }
        try exit()
        return elements
    }

    func structure<Value>(_ contents: String, _ read: () throws(PortalError) -> Value) throws(PortalError) -> Value {
        _ = try enter("r", contents)
        let value = try read()
        try exit()
        return value
    }

    func objectPath() throws(PortalError) -> String {
        var pointer: UnsafePointer<CChar>?
        let result = sd_bus_message_read_basic(message, CChar(Character("o").asciiValue!), &pointer)
        if result < 0 { throw .invalidArgument("malformed arguments (\(String(cString: strerror(-result))))") }
        return pointer.map { String(cString: $0) } ?? ""
    }
}
