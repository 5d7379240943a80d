import Foundation
import Glibc
import Policy
import Synchronization
import SystemPackage

/// Backing descriptors the daemon holds for apps' open files and folders,
/// counted per app and in total (SPEC S40: "An app that reaches its bound
/// gets the error itself (and an event); no other app and never the owner
/// is refused for it"). One app opening a granted file 20,000 times used
/// to take the daemon's every descriptor, and every other app, and the
/// owner's control socket, met EMFILE (issue 29, finding 3).
///
/// - An app past `perApp` gets EMFILE, as a process past its own
///   RLIMIT_NOFILE does, and a `descriptor-budget-exhausted` event.
/// - All apps together stop at `total`: the daemon's limit less what it
///   keeps for itself (control sockets, database, host-change channel,
///   folder nodes: docs/DECISIONS.md, decision 45). Past it, an app
///   within its own budget gets ENFILE, the system-wide "table full".
///   With the default `perApp` (a quarter of `total` at most) that takes
///   four apps at their budgets.
///
/// The owner's inspect view (SPEC S4) has a budget of its own, outside the
/// apps' share, so no app can use it up.
public final class DescriptorBudget: Sendable {
    public let perApp: Int
    public let total: Int
    private let counts = Mutex<Counts>(Counts())

    private struct Counts {
        var byUser: [FileUser: Int] = [:]
        var total = 0
    }

    public init(perApp: Int, total: Int) {
        self.perApp = perApp
        self.total = total
    }

    enum Refusal: Error {
        case appBudget, allApps
    }

    /// One descriptor for `user`, given back when the charge goes.
    func charge(_ user: FileUser) -> Result<DescriptorCharge, Refusal> {
        let sharesTotal = Self.sharesTotal(user)
        let refusal: Refusal? = counts.withLock { counts in
            if counts.byUser[user, default: 0] >= perApp { return .appBudget }
            if sharesTotal && counts.total >= total { return .allApps }
            counts.byUser[user, default: 0] += 1
            if sharesTotal { counts.total += 1 }
            return nil
        }
        if let refusal { return .failure(refusal) }
        return .success(DescriptorCharge(budget: self, user: user))
    }

    fileprivate func giveBack(_ user: FileUser) {
        let sharesTotal = Self.sharesTotal(user)
        counts.withLock { counts in
            if sharesTotal { counts.total -= 1 }
            let left = counts.byUser[user, default: 1] - 1
            counts.byUser[user] = left > 0 ? left : nil
        }
    }

    /// Owner processes draw on the daemon's own part of the limit,
    /// not the apps' share: apps filling theirs never refuse the owner.
    private static func sharesTotal(_ user: FileUser) -> Bool { user != .owner }
}

/// One charged descriptor: held by the handle that owns the descriptor,
/// given back when the handle goes (after its descriptor is closed).
final class DescriptorCharge: Sendable {
    private let budget: DescriptorBudget
    private let user: FileUser

    fileprivate init(budget: DescriptorBudget, user: FileUser) {
        self.budget = budget
        self.user = user
    }

    deinit { budget.giveBack(user) }
}

extension ScopeFileSystem {
    /// Charges the descriptor an open, create or opendir is about to make;
    /// refused: EMFILE (the app's own budget, an event) or ENFILE.
    func chargeDescriptor(_ caller: Caller, _ resolved: NodeTable.Resolved, _ operation: FileOperation)
        throws(Errno) -> DescriptorCharge
    {
        switch descriptorBudget.charge(FileUser(caller)) {
        case .success(let charge):
            return charge
        case .failure(.appBudget):
            var pid: Int32? = nil
            if case .app(_, let process) = caller { pid = process.pid }
            events.record(
                Event(
                    time: Date().timeIntervalSince1970, kind: .descriptorBudgetExhausted,
                    app: caller.app ?? resolved.node.place.app, pid: pid, path: displayPath(resolved),
                    operation: operation.rawValue, errno: EMFILE, count: descriptorBudget.perApp))
            throw .tooManyOpenFiles
        case .failure(.allApps):
            throw .tooManyOpenFilesInSystem
        }
    }
}
