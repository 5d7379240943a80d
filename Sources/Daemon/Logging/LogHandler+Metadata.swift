import Logging

extension LogHandler {
    /// The handler's metadata, then its provider's, then the event's own;
    /// a later one wins a key (swift-log's order).
    func mergedMetadata(_ own: Logger.Metadata?) -> Logger.Metadata {
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { _, new in new } }
        if let own { merged.merge(own) { _, new in new } }
        return merged
    }
}
