/// How a grant request treats a grant the app already has for the item.
public enum GrantUpdate: Sendable {
    /// `scopefs grant`: the settings page. Access and lifetime become what
    /// was asked, narrowing included.
    case replace
    /// The picker (`open`, `move`, `pick`): choosing an item again never
    /// takes anything away. Read-only becomes read-write only when
    /// read-write is asked; a persistent grant stays persistent.
    case widen
}

/// A grant as a grant request left it, with the grant it replaced.
public struct GrantChange: Sendable, Codable, Equatable {
    public var grant: Grant
    /// The app's grant of the same item before the request (nil: new).
    public var previous: Grant?

    public init(grant: Grant, previous: Grant?) {
        self.grant = grant
        self.previous = previous
    }

    /// What changed in an existing grant, as people read it
    /// ("access read-write -> read-only"); empty for a new grant or none.
    public var changes: [String] {
        guard let previous else { return [] }
        var changes: [String] = []
        if previous.access != grant.access {
            changes.append("access \(Self.label(previous.access)) -> \(Self.label(grant.access))")
        }
        if previous.state != grant.state {
            changes.append("state \(previous.state.rawValue) -> \(grant.state.rawValue)")
        }
        if previous.isSession != grant.isSession {
            changes.append("lifetime \(Self.lifetime(previous)) -> \(Self.lifetime(grant))")
        }
        return changes
    }

    static func label(_ access: Access) -> String { access == .read ? "read-only" : "read-write" }

    static func lifetime(_ grant: Grant) -> String { grant.isSession ? "session" : "persistent" }

    /// Access and lifetime a request ends with, given the existing grant.
    public static func resolved(
        asked access: Access, session: Bool, existing: Grant?, update: GrantUpdate
    ) -> (access: Access, session: Bool) {
        guard let existing, update == .widen else { return (access, session) }
        let widened: Access = existing.access == .readWrite || access == .readWrite ? .readWrite : .read
        return (widened, existing.isSession && session)
    }
}
