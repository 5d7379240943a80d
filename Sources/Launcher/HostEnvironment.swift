import Glibc
import HostText
import Policy

/// The process's environment as bytes (SPEC S5, S33a, issue 16).
/// `ProcessInfo.environment` decodes every entry as UTF-8 and loses a value
/// (or a name) that is not; `scopefs run` must hand the app its
/// environment unchanged. Names and values are held as `HostName` strings,
/// and go back to bytes with `withHostCString` when the app is spawned.
package enum HostEnvironment {
    package static var current: [String: String] {
        var result: [String: String] = [:]
        var entry = environ
        while let pointer = entry.pointee {
            // Split at the first "=" scalar (a Character could join it
            // with a combining mark that follows).
            let text = HostName.string(cString: pointer).unicodeScalars
            if let equals = text.firstIndex(of: "=") {
                let name = String(text[..<equals])
                // The first definition wins, as getenv(3) finds it.
                if result[name] == nil { result[name] = String(text[text.index(after: equals)...]) }
            }
            entry += 1
        }
        return result
    }
}
