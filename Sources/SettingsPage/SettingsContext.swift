import Hummingbird
import NIOCore

/// A request's context: Hummingbird's, plus the connecting socket's
/// address, which the peer check maps to a process (`AppPeerCheck`).
public struct SettingsContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    public let remoteAddress: SocketAddress?
    public let localAddress: SocketAddress?

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress
        localAddress = source.channel.localAddress
    }
}
