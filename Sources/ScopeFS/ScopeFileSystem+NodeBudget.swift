/// The node budget's side of the file system (`NodeBudget`): what the
/// daemon's pruner asks for, on its own thread.
extension ScopeFileSystem {
    public var nodeBudget: NodeBudget { table.budget }

    /// The next nodes the kernel should drop; nil once the table is at the
    /// budget's target (`NodeTable.nodesToForget`).
    public func nodesToForget(batch: Int) -> [UnusedNode]? { table.nodesToForget(batch: batch) }
}
