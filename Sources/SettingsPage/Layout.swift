import CommandErrors
import Foundation
import HTTPTypes
import Hummingbird

/// The frame of every page: a skip link, the sections' navigation and the
/// content. Plain HTML and one stylesheet; no script is needed to read or
/// to change anything.
enum Layout {
    enum Section: String, CaseIterable {
        case apps = "Apps"
        case items = "Items"
        case providers = "Providers"
        case activity = "Activity"

        var path: String {
            switch self {
            case .apps: "/"
            case .items: "/items"
            case .providers: "/providers"
            case .activity: "/activity"
            }
        }
    }

    static func page(_ title: String, section: Section?, head: HTML = "", _ body: HTML) -> HTML {
        let links = Section.allCases.map { item -> HTML in
            let current: HTML = item == section ? " aria-current=\"page\"" : ""
            return "<li><a href=\"\(item.path)\"\(current)>\(item.rawValue)</a></li>"
        }
        return """
            <!DOCTYPE html>
            <html lang="en">
            <head>
            <meta charset="utf-8">
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <meta name="color-scheme" content="light dark">
            <title>\(title) · Files and Folders · ScopeFS</title>
            <link rel="stylesheet" href="/style.css">
            \(head)
            </head>
            <body>
            <a class="skip" href="#main">Skip to content</a>
            <header><p class="brand">ScopeFS · Files and Folders</p>
            <nav aria-label="Sections"><ul>\(links)</ul></nav></header>
            <main id="main" tabindex="-1">
            <h1>\(title)</h1>
            \(body)
            </main>
            </body>
            </html>

            """
    }

    static func response(_ html: HTML, status: HTTPResponse.Status = .ok) -> Response {
        Response(
            status: status, headers: [.contentType: "text/html; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(string: html.text)))
    }

    /// A time as the CLI's JSON prints it (ISO 8601 UTC with milliseconds).
    static func time(_ seconds: Double) -> String {
        Date(timeIntervalSince1970: seconds).formatted(
            Date.ISO8601FormatStyle(includingFractionalSeconds: true, timeZone: TimeZone(secondsFromGMT: 0)!))
    }
}

/// A refusal or a bad request, as a page that says what to do; nothing has
/// been changed when one is shown.
enum ErrorPage {
    static func response(_ status: HTTPResponse.Status, _ message: String) -> Response {
        Layout.response(
            Layout.page(
                "\(status.code) \(status.reasonPhrase)", section: nil,
                "<p class=\"error\" role=\"alert\">\(message)</p><p>Nothing was changed.</p>"),
            status: status)
    }
}

extension ErrorPage {
    /// A failed command as the CLI would report it, with the HTTP status
    /// that matches its exit code (docs/CLI.md).
    static func response(_ error: CommandError) -> Response {
        let status: HTTPResponse.Status =
            switch error.kind {
            case .usage, .badData: .badRequest
            case .unknown, .noInput: .notFound
            case .refused: .forbidden
            case .noDaemon, .timedOut: .serviceUnavailable
            case .badState: .conflict
            default: .internalServerError
            }
        return response(status, "\(error.message) (exit code \(error.exitCode) on the command line)")
    }
}
