import Glibc
import Policy
import ScopeFS

/// Joins the two halves of a host rename into one `moved` (issue 31): the
/// channel reports a name going from one folder and coming to another as
/// two events, one after the other (inotify joins them by a cookie,
/// fanotify by their order). A half whose other half never comes — the
/// item left for, or came from, a folder no view holds — is `deleted` or
/// `appeared`; a lone "from" waits at most `patience` seconds, in case
/// its "to" is in the next read.
struct RenamePairing {
    static let patience: Double = 0.05

    private struct Departure {
        var provider: ProviderID
        var path: String
        var cookie: UInt32
        var at: Double
    }

    private var departures: [Departure] = []

    /// Whether a "from" waits for its "to" (the channel then polls briefly).
    var isWaiting: Bool { !departures.isEmpty }

    /// The subitem changes of one read's events, in order; lone "from"s
    /// are kept for the next read.
    mutating func changes(_ events: [(naming: HostChange.Naming, provider: ProviderID, path: String)])
        -> [(ProviderID, SubitemChange)]
    {
        var changes: [(ProviderID, SubitemChange)] = []
        for event in events {
            switch event.naming {
            case .created:
                changes.append((event.provider, .appeared(event.path)))
            case .deleted:
                changes.append((event.provider, .deleted(event.path)))
            case .movedFrom(let cookie):
                departures.append(Departure(provider: event.provider, path: event.path, cookie: cookie, at: Self.now()))
            case .movedTo(let cookie):
                if let index = departures.firstIndex(where: { $0.provider == event.provider && $0.cookie == cookie }) {
                    let departure = departures.remove(at: index)
                    changes.append((event.provider, .moved(from: departure.path, to: event.path)))
                } else {
                    changes.append((event.provider, .appeared(event.path)))
                }
            }
        }
        return changes
    }

    /// The "from"s that waited longer than `patience`: gone from every
    /// folder a view holds.
    mutating func expired() -> [(ProviderID, SubitemChange)] {
        let now = Self.now()
        let (old, young) = (
            departures.filter { now - $0.at >= Self.patience }, departures.filter { now - $0.at < Self.patience }
        )
        departures = young
        return old.map { ($0.provider, .deleted($0.path)) }
    }

    private static func now() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }
}
