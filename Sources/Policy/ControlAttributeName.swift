/// The names of ScopeFS's control attributes (docs/API.md, SPEC S6–S8,
/// S12, S24, S25), shared by the daemon that answers them and the command
/// line that reads them. The client packages (Swift, Python, C) mirror
/// the ones they use; PolicyTests checks that their copies agree.
public enum ControlAttributeName: String, CaseIterable, Sendable {
    case start = "user.scopefs.start"
    /// Start for the rest of the process's life: its exit releases the
    /// scope without a leak (`scopefs scope exec`).
    case startUntilExit = "user.scopefs.start-until-exit"
    case stop = "user.scopefs.stop"
    case scope = "user.scopefs.scope"
    // Item metadata (SPEC S24), read through a reference, which the
    // kernel follows to the item (user.* attributes of a symlink itself
    // are refused by the kernel before they reach ScopeFS).
    case item = "user.scopefs.item"
    case provider = "user.scopefs.provider"
    case providerName = "user.scopefs.provider-name"
    case path = "user.scopefs.path"
    case grantState = "user.scopefs.grant-state"
    // Bookmarks (SPEC S25).
    case bookmark = "user.scopefs.bookmark"
    case readOnlyBookmark = "user.scopefs.bookmark-read-only"
    // An extension's item (SPEC S42): dataless, partial, materialized,
    // pinned, dirty, uploading, conflict or error; and a download's
    // progress as "DONE/TOTAL" bytes.
    case state = "user.scopefs.state"
    case progress = "user.scopefs.progress"
    // An item's preview (SPEC S50): a PNG, read by any process that may
    // see the item (no scope, never a download), written by one that may
    // write it; binary, so answered apart from the textual ones.
    case thumbnail = "user.scopefs.thumbnail"

    /// Every control attribute starts with this; such names are never
    /// stored on host files.
    public static let prefix = "user.scopefs."

    /// Whether reading the attribute acts (start or stop) rather than reports.
    public var acts: Bool { self == .start || self == .startUntilExit || self == .stop }
}
