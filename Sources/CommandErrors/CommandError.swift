/// Errors meant for people: a message that names the thing and the remedy,
/// and a documented exit code (docs/CLI.md, SPEC S34). Errors that can only
/// mean a bug in ScopeFS are preconditions, not this type.
public struct CommandError: Error, CustomStringConvertible, Sendable {
    public enum Kind: Int32, Sendable {
        case usage = 64
        case badData = 65
        case noInput = 66
        case unknown = 67
        case noDaemon = 69
        case internalError = 70
        case cannotMount = 73
        case ioError = 74
        case timedOut = 75
        case refused = 77
        case badState = 78
        /// `scopefs run`: the command cannot be executed / was not found.
        case commandNotExecutable = 126
        case commandNotFound = 127

        /// 73 is "cannot create" (sysexits' EX_CANTCREAT): a mountpoint that
        /// cannot take a mount, and an app or provider id that already exists.
        public static let alreadyExists = Kind.cannotMount
        /// 69 is "unavailable": no daemon serves the state directory, a
        /// mountpoint that is not mounted, a path outside every ScopeFS mount.
        public static let notMounted = Kind.noDaemon
    }

    public var kind: Kind
    public var message: String

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var exitCode: Int32 { kind.rawValue }
    public var description: String { message }
}
