import CBuildInfo

/// The one place the version lives: `scopefs --version`, and the Makefile
/// reads it for the Debian package and the C library (`make version`).
enum ScopeFSVersion {
    static let package = "0.3.0"

    /// `0.3.0`, or `0.3.0 (v0.2.0-12-g9a707e7)` when the Makefile built the
    /// binary from a git checkout.
    static var description: String {
        let describe = String(cString: scopefs_git_describe())
        return describe.isEmpty ? package : "\(package) (\(describe))"
    }
}
