import CommandErrors
import HostText
import Policy
import PolicyStore

/// Apps' display names (`app add --name`), for the text and JSON of
/// `privacy`, `status` and `events`: people know their apps by name, the
/// policy by id.
struct AppNames {
    private let names: [AppID: String]

    init(_ apps: [App]) {
        names = Dictionary(apps.map { ($0.id, $0.name) }, uniquingKeysWith: { first, _ in first })
    }

    init(_ repository: any IsolationStore) throws(CommandError) {
        self.init(try repository.apps())
    }

    /// No names known (the database cannot be read): ids alone.
    static let none = AppNames([])

    /// The display name, when it says more than the id (an app added
    /// without `--name` is named by its id).
    func name(_ app: AppID) -> String? {
        guard let name = names[app], !name.isEmpty, name != app else { return nil }
        return name
    }

    /// `com.example.editor (Editor)`, escaped for a terminal (SPEC S29).
    func label(_ app: AppID) -> String {
        guard let name = name(app) else { return app.escapedForTerminal }
        return "\(app) (\(name))".escapedForTerminal
    }
}
