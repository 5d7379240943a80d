import CommandErrors
import Control
import Documents
import Policy

/// An app's requests about its own documents: resolving a bookmark (SPEC
/// S26, S27) and a presenter's wait for notices (issue 17). The app is the
/// sender's, from the kernel; it is never named in the request.
enum DocumentHandling {
    static func resolve(_ token: String, app: AppID, pid: Int32, services: DaemonServices) -> ControlResponse {
        do {
            // The bookmark's item, when a rename moved it, is found first,
            // and served, so the resolution sees where it is now (SPEC S26).
            if try services.documents.relocateItems(before: token) { try services.reloader.reload() }
            let resolution = try services.documents.resolve(
                token, by: app, pid: pid, in: services.fileSystem.snapshot)
            var response = ControlResponse(ok: true, mountpoint: services.mountpoint)
            response.resolution = resolution
            response.path = services.mountpoint + "/" + app + "/" + resolution.pathInApp
            return response
        } catch {
            return .failure(error.exitCode, error.message)
        }
    }

    /// How long a presenter's watch may wait: it holds one of the app's
    /// connections meanwhile, so polls are short.
    static let longestWatch: Double = 10

    static func watch(app: AppID, after: UInt64?, wait: Double?, notices board: NoticeBoard) -> ControlResponse {
        let (notices, cursor) = board.notices(
            for: app, after: after, wait: min(max(wait ?? longestWatch, 0), longestWatch))
        var response = ControlResponse(ok: true)
        response.notices = notices
        response.cursor = cursor
        return response
    }
}
