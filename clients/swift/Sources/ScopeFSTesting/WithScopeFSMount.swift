/// Runs `body` with a new `ScopeFSMount` (see its `init` for the
/// arguments) and closes the mount on every way out, a thrown error
/// included: the app processes it started are killed, the file system is
/// unmounted, its temporary directory removed.
///
///     try withScopeFSMount(app: "com.example.reader", files: ["docs/report.txt": "numbers\n"],
///                          grants: ["local:docs"]) { mount in
///         let app = try mount.start([reader, mount.path("local:docs/report.txt")])
///         try mount.revoke("local:docs")
///         try app.waitForLine("lost access")
///     }
public func withScopeFSMount<Result>(
    app: String = "com.example.app", files: [String: String] = [:], grants: [String] = [],
    readOnlyGrants: [String] = [], scopes: ScopeFSMount.Scopes = .strict, openFiles: ScopeFSMount.OpenFiles = .revoke,
    _ body: (ScopeFSMount) throws -> Result
) throws -> Result {
    let mount = try ScopeFSMount(
        app: app, files: files, grants: grants, readOnlyGrants: readOnlyGrants, scopes: scopes, openFiles: openFiles)
    defer { mount.close() }
    return try body(mount)
}

/// `withScopeFSMount` for a body that awaits.
public func withScopeFSMount<Result>(
    app: String = "com.example.app", files: [String: String] = [:], grants: [String] = [],
    readOnlyGrants: [String] = [], scopes: ScopeFSMount.Scopes = .strict, openFiles: ScopeFSMount.OpenFiles = .revoke,
    isolation: isolated (any Actor)? = #isolation, _ body: (ScopeFSMount) async throws -> Result
) async throws -> Result {
    let mount = try ScopeFSMount(
        app: app, files: files, grants: grants, readOnlyGrants: readOnlyGrants, scopes: scopes, openFiles: openFiles)
    defer { mount.close() }
    return try await body(mount)
}
