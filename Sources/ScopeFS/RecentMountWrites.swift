/// The host files the mount wrote last, each as its writer left it (the
/// close of a handle that wrote, or a truncate by path). An inotify event
/// that finds a file so is the echo of the mount's own write (inotify does
/// not say who wrote). Kept by file, not by node: once a file is closed and
/// its entry dropped, the kernel forgets its node, often before the echo
/// is read. Bounded: past `capacity` files, the first remembered goes first.
struct RecentMountWrites {
    static let capacity = 1024

    private var versions: [FileIdentity: FileVersion] = [:]
    /// The remembered files in the order first remembered, as a ring.
    private var order: [FileIdentity] = []
    private var oldest = 0

    mutating func record(_ identity: FileIdentity, as version: FileVersion) {
        guard versions.updateValue(version, forKey: identity) == nil else { return }
        if order.count < Self.capacity {
            order.append(identity)
        } else {
            versions[order[oldest]] = nil
            order[oldest] = identity
            oldest = (oldest + 1) % Self.capacity
        }
    }

    func isAsWritten(_ identity: FileIdentity, version: FileVersion) -> Bool {
        versions[identity] == version
    }
}
