// ScopeFSClient — the Swift client library of ScopeFS (SPEC S31).
//
// ScopeFS gates every content operation on a provider item behind a
// per-process security-scope counter (SPEC S6–S9). This library lets a Swift
// app raise and lower that counter with the names an iOS/macOS developer
// already knows:
//
//     let url = URL(fileURLWithPath: "/mnt/scopefs/com.example.app/Providers/local/docs/file.txt")
//     guard url.startAccessingSecurityScopedResource() else { ... }
//     defer { url.stopAccessingSecurityScopedResource() }
//
// or, with errors that carry errno and a scope that always ends:
//
//     try url.withSecurityScopedAccess { try String(contentsOf: url, encoding: .utf8) }
//
// Bookmarks (SPEC S25–S27) use Apple's names too:
//
//     let data = try url.bookmarkData(options: .withSecurityScope)
//     var isStale = false
//     let again = try URL(resolvingBookmarkData: data, options: .withSecurityScope,
//                         relativeTo: nil, bookmarkDataIsStale: &isStale)
//
// Files, by concern:
// - URL+SecurityScopedResource.swift  Apple's Bool-returning start/stop, `scopeCount`
// - URL+WithSecurityScopedAccess.swift the scoped helper
// - URL+Bookmarks.swift                Apple's bookmark names
// - ScopeFS.swift                      the throwing API (`ScopeFS.startAccessing`, …)
// - ScopeFS+Bookmarks.swift            the throwing bookmark API
// - ScopeFSError.swift                 the typed error carrying errno
// - ControlAttribute.swift             the `user.scopefs.*` names and reply parsing
// - ExtendedAttributes.swift           the getxattr(2) call itself
// - ControlSocket.swift                the daemon's control socket (bookmark resolution only)
//
// Scopes and bookmark creation are plain getxattr(2) calls on the path
// inside the mount, the same syscall contract that any language can use
// (docs/API.md, SPEC S12); only resolving a bookmark talks to the daemon,
// over its control socket. The library keeps no state.
