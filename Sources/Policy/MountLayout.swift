/// The paths inside the mount, in one place (SPEC S2, S18, S23):
///
///     MOUNT/APP/Providers/PROVIDER/PATH   a provider's items, as the app sees them
///     MOUNT/APP/Container/...             the app's own container
///     Container/tmp/APP-Inbox/            copies an import put in the container
///
/// Every component that builds or parses such a path asks here, so the
/// layout can change in one file.
public enum MountLayout {
    /// The folder of provider views in an app's directory.
    public static let providers = "Providers"
    /// The app's container in its directory.
    public static let container = "Container"
    /// The container's folder of documents the app made (SPEC S26).
    public static let documents = "Documents"

    /// `Providers/PROVIDER/PATH`: an item in the app's view (no leading slash).
    public static func providerPath(provider: ProviderID, path: String) -> String {
        providers + "/" + provider + (path.isEmpty ? "" : "/" + path)
    }

    /// `/APP/Providers/PROVIDER/PATH`: an item from the mount's root.
    public static func providerPath(app: AppID, provider: ProviderID, path: String) -> String {
        "/" + app + "/" + providerPath(provider: provider, path: path)
    }

    /// `Container/PATH`: a container file in the app's view.
    public static func containerPath(_ path: String) -> String {
        path.isEmpty ? container : container + "/" + path
    }

    /// `/APP/Container/PATH` from the mount's root.
    public static func containerPath(app: AppID, path: String) -> String {
        "/" + app + "/" + containerPath(path)
    }

    /// The inbox inside the container (SPEC S18; Apple's `Documents/Inbox`):
    /// a temporary folder named after the app, cleared by the daemon.
    public static func inbox(of app: AppID) -> String { "tmp/\(app)-Inbox" }

    /// The provider and the item path of `Providers/PROVIDER/PATH` (a path
    /// in the app's view, already normalized), or nil for anything else.
    /// The item of `Container/PATH` in an app's view: PATH; nil for any
    /// other path (the bare `Container` folder too).
    public static func containerItem(inAppView path: String) -> String? {
        guard path.hasPrefix(container + "/") else { return nil }
        let item = String(path.dropFirst(container.count + 1))
        return item.isEmpty ? nil : item
    }

    public static func providerItem(inAppView path: String) -> (provider: ProviderID, path: String)? {
        let parts = path.split(separator: "/", maxSplits: 2).map(String.init)
        guard parts.count >= 2, parts[0] == providers else { return nil }
        return (parts[1], parts.count == 3 ? parts[2] : "")
    }
}
