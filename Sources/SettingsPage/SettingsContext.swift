import Hummingbird
import NIOCore

/// A request's context: Hummingbird's, plus the connecting socket's
/// address, which the peer check maps to a process (`AppPeerCheck`), and
/// the connection, which a live stream closes when its reader stalls.
public struct SettingsContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    public let remoteAddress: SocketAddress?
    public let localAddress: SocketAddress?
    public let channel: (any Channel)?

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress
        localAddress = source.channel.localAddress
        channel = source.channel
    }
}
