import Control
import Documents
import Foundation
import HostText
import Policy

/// A FileChooser call as a ScopeFS pick (SPEC S21a): what the owner's
/// agent is asked, and how its answer becomes the URIs the portal
/// frontend expects (host files, which the frontend then exports through
/// the Documents portal, that is, through ScopeFS again).
enum ChooserMethod: String {
    case openFile = "OpenFile"
    case saveFile = "SaveFile"
    case saveFiles = "SaveFiles"
}

struct ChooserPick {
    let method: ChooserMethod
    let options: ChooserOptions
    let request: PickRequest

    /// `locate` names the provider item of a host folder (nil: in none).
    init(_ method: ChooserMethod, options: ChooserOptions, locate: (String) -> String?) throws(PortalError) {
        self.method = method
        self.options = options
        let saving = method != .openFile
        if saving {
            if method == .saveFile, let name = options.currentName, !Self.isFileName(name) {
                throw .invalidArgument("current_name \(name) is not a file name (no /, . or ..)")
            }
            if method == .saveFiles {
                for name in options.files where !Self.isFileName(name) {
                    throw .invalidArgument("files: \(name) is not a file name (no /, . or ..)")
                }
            }
        }
        // Saving picks the folder to save into; OpenFile with `directory`
        // picks folders; otherwise files of the filters' types.
        let types = saving || options.directory ? [ContentTypes.folder] : Self.contentTypes(options)
        if let currentFolder = options.currentFolder, !currentFolder.hasPrefix("/") {
            throw .invalidArgument("current_folder \(currentFolder) is not an absolute path")
        }
        let start = (options.currentFolder ?? options.currentFile.map { ($0 as NSString).deletingLastPathComponent })
            .flatMap(locate)
        self.request = PickRequest(
            mode: .open, contentTypes: types, allowsMultipleSelection: !saving && options.multiple, directory: start)
        if let problem = request.validated() { throw .invalidArgument("the pick this call asks for: \(problem)") }
    }

    static func isFileName(_ name: String) -> Bool {
        !name.isEmpty && name != "." && name != ".." && !name.contains("/") && !name.contains("\u{0}")
    }

    /// The MIME types the filters name, through shared-mime-info: a MIME
    /// pattern as it is, a glob by the type the database gives a name it
    /// matches (`*.txt` is text/plain). A filter that matches everything
    /// (`*`), or a glob the database knows no type for, leaves the pick
    /// unfiltered: filters help the user find files, they are not a limit
    /// the app may rely on (the user may choose "All files" in any chooser).
    static func contentTypes(_ options: ChooserOptions) -> [String] {
        let filters = options.filters + (options.currentFilter.map { [$0] } ?? [])
        let database = ContentTypes()
        var types: [String] = []
        for filter in filters {
            for (kind, pattern) in filter.patterns {
                let type: String
                if kind == 1 {
                    type = pattern
                } else {
                    guard pattern.hasPrefix("*."), !pattern.dropFirst(2).contains(where: { "*?[".contains($0) }) else {
                        return []
                    }
                    type = database.mimeType(ofName: "file" + pattern.dropFirst())
                    if type == "application/octet-stream" { return [] }
                }
                if type == "*/*" || type == "application/octet-stream" { return [] }
                if !types.contains(type) { types.append(type) }
            }
        }
        return types
    }
}

/// The host file of a path in an app's view (`Providers/PROVIDER/PATH`),
/// by the providers' folders.
func hostPath(ofAppPath path: String, providers: [Provider]) -> String? {
    let components = path.split(separator: "/", omittingEmptySubsequences: true)
    guard components.count >= 2, components[0] == Substring(MountLayout.providers),
        let provider = providers.first(where: { $0.id == String(components[1]) && $0.extension == nil })
    else { return nil }
    let rest = components.dropFirst(2).joined(separator: "/")
    return rest.isEmpty ? provider.directory : (provider.directory == "/" ? "" : provider.directory) + "/" + rest
}

/// A `file://` URI of a host path, its bytes percent-encoded as GLib's
/// g_filename_to_uri does (what the frontend's g_filename_from_uri undoes).
func fileURI(_ path: String) -> String {
    let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~/!$&'()*+,;=:@".utf8)
    var uri = "file://"
    for byte in path.hostBytes {
        if allowed.contains(byte) {
            uri.append(Character(Unicode.Scalar(byte)))
        } else {
            uri += String(format: "%%%02X", byte)
        }
    }
    return uri
}
