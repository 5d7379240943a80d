/// A name that came, went or moved inside a provider (issue 31): what a
/// folder's presenter hears as `appeared`, `deleted` or `moved` for items
/// inside it. Paths are relative to the provider's root, as grants name
/// items; the daemon turns them into each app's own paths.
public enum SubitemChange: Sendable, Hashable {
    case appeared(String)
    case deleted(String)
    case moved(from: String, to: String)
}
