import Glibc

/// Names of copies being staged (SPEC S34; docs/DECISIONS.md, decision 18): a
/// staging folder `.scopefs-partial-copies-<uid>` on a disk other than the
/// state's, or an older copy's `.NAME.scopefs-partial-<pid>`. The mount
/// never shows them in a provider: lookups are ENOENT and listings skip
/// them, so that no app sees a copy half-made.
public enum StagingNames {
    public static let marker = ".scopefs-partial-"

    public static func isStaging(_ name: String) -> Bool {
        name.withCString { isStaging(cString: $0) }
    }

    public static func isStaging(cString name: UnsafePointer<CChar>) -> Bool {
        name[0] == CChar(UInt8(ascii: ".")) && strstr(name, marker) != nil
    }
}
