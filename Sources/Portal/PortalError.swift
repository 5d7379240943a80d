/// An error the portal answers a method call with: a D-Bus error name of
/// xdg-document-portal's (clients match on them) and a sentence.
public struct PortalError: Error, Sendable, Equatable {
    public var name: String
    public var message: String

    static func invalidArgument(_ message: String) -> PortalError {
        PortalError(name: "org.freedesktop.portal.Error.InvalidArgument", message: message)
    }
    static func notFound(_ message: String) -> PortalError {
        PortalError(name: "org.freedesktop.portal.Error.NotFound", message: message)
    }
    static func notAllowed(_ message: String) -> PortalError {
        PortalError(name: "org.freedesktop.portal.Error.NotAllowed", message: message)
    }
    static func failed(_ message: String) -> PortalError {
        PortalError(name: "org.freedesktop.portal.Error.Failed", message: message)
    }
}
