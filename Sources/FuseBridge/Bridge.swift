import CFuse3
import Glibc
import HostText
import SystemPackage

/// Helpers shared by the C callbacks. Every request goes through `answer`,
/// which replies exactly once: with the body's result, or with its errno.
enum Bridge {
    static func fileSystem(_ request: fuse_req_t) -> any FileSystem {
        BridgeContext.from(fuse_req_userdata(request)!).fileSystem
    }

    static func caller(_ request: fuse_req_t) -> Request {
        let context = fuse_req_ctx(request)!.pointee
        var credentials = (uid: context.uid, gid: context.gid)
        if let alias = alias(request) { credentials = alias.incoming(uid: context.uid, gid: context.gid) }
        return Request(
            threadID: context.pid, uid: credentials.uid, gid: credentials.gid, umask: context.umask,
            libfuseRequest: request)
    }

    /// The caller of a write, a truncate or an O_TRUNC open, with whether
    /// the kernel left clearing the file's set-id bits to us.
    static func changingCaller(_ request: fuse_req_t) -> Request {
        var caller = caller(request)
        caller.clearsSetIDBits = SetIDClearing.pending
        return caller
    }

    /// Runs `body` and sends its result with `reply`, or its errno.
    @inline(__always)
    static func answer<T>(
        _ request: fuse_req_t, _ body: () throws(Errno) -> T, reply: (T) -> Void
    ) {
        guard admitted(request) else {
            _ = fuse_reply_err(request, EACCES)
            return
        }
        let result: T
        do {
            result = try body()
        } catch {
            _ = fuse_reply_err(request, error.rawValue)
            return
        }
        reply(result)
    }

    /// For requests whose only answer is success or an errno.
    @inline(__always)
    static func answer(_ request: fuse_req_t, _ body: () throws(Errno) -> Void) {
        answer(request, body) { _ = fuse_reply_err(request, 0) }
    }

    /// `entry` as the kernel receives it in answer to `request`.
    static func entryParam(_ entry: Entry, for request: fuse_req_t) -> fuse_entry_param {
        var param = fuse_entry_param()
        param.ino = fuse_ino_t(entry.inode)
        param.generation = 0
        param.attr = shown(entry.attributes, to: request)
        param.attr_timeout = entry.attributeTimeout
        param.entry_timeout = entry.entryTimeout
        return param
    }

    static func replyEntry(_ request: fuse_req_t, _ entry: Entry) {
        var param = entryParam(entry, for: request)
        _ = fuse_reply_entry(request, &param)
    }

    static func replyAttributes(_ request: fuse_req_t, _ attributes: Attributes) {
        var stat = shown(attributes.stat, to: request)
        _ = fuse_reply_attr(request, &stat, attributes.timeout)
    }

    static func apply(_ open: OpenFile, to info: UnsafeMutablePointer<fuse_file_info>) {
        info.pointee.fh = open.handle
        info.pointee.keep_cache = open.keepCache ? 1 : 0
        info.pointee.direct_io = open.directIO ? 1 : 0
    }

    /// Answers an OPEN or CREATE with `send`, through passthrough where
    /// the session has it for this file (`PassthroughFiles`). A reply that
    /// does not reach its opener (it was interrupted) is released here, as
    /// the kernel sends no RELEASE for it; returns whether it was sent.
    @discardableResult
    static func replyOpen(
        _ request: fuse_req_t, inode: UInt64, _ open: OpenFile, _ info: UnsafeMutablePointer<fuse_file_info>,
        send: () -> Int32
    ) -> Bool {
        let context = BridgeContext.from(fuse_req_userdata(request)!)
        apply(open, to: info)
        let backing = context.passthrough.opening(inode: inode, handle: open.handle, open.passthrough)
        // The inode's pages are the daemon path's; a passthrough open
        // drops whatever an earlier one left (reads go to the backing file).
        if backing != nil { info.pointee.keep_cache = 0 }
        let reply = backing.map { PassthroughWire.OpenReply(handle: open.handle, backingID: $0) }
        guard PassthroughWire.sending(reply, send) != -ENOENT else {
            context.passthrough.released(inode: inode, handle: open.handle)
            context.fileSystem.release(inode: inode, handle: open.handle)
            return false
        }
        return true
    }

    /// A name or path from the kernel, kept losslessly: its bytes need not
    /// be UTF-8 (SPEC S33a, `HostName`).
    static func string(_ pointer: UnsafePointer<CChar>?) -> String {
        pointer.map { HostName.string(cString: $0) } ?? ""
    }

    static func changes(_ request: fuse_req_t, _ attr: UnsafeMutablePointer<stat>?, _ toSet: Int32)
        -> AttributeChanges
    {
        var changes = AttributeChanges()
        guard let attr = attr?.pointee else { return changes }
        if toSet & FUSE_SET_ATTR_MODE != 0 { changes.mode = attr.st_mode }
        if toSet & FUSE_SET_ATTR_UID != 0 { changes.uid = attr.st_uid }
        if toSet & FUSE_SET_ATTR_GID != 0 { changes.gid = attr.st_gid }
        if let alias = alias(request) {
            (changes.uid, changes.gid) = alias.incomingChange(uid: changes.uid, gid: changes.gid)
        }
        if toSet & FUSE_SET_ATTR_SIZE != 0 { changes.size = Int64(attr.st_size) }
        if toSet & FUSE_SET_ATTR_ATIME_NOW != 0 {
            changes.accessTime = .now
        } else if toSet & FUSE_SET_ATTR_ATIME != 0 {
            changes.accessTime = .time(attr.st_atim)
        }
        if toSet & FUSE_SET_ATTR_MTIME_NOW != 0 {
            changes.modificationTime = .now
        } else if toSet & FUSE_SET_ATTR_MTIME != 0 {
            changes.modificationTime = .time(attr.st_mtim)
        }
        return changes
    }

    /// Answers getxattr/listxattr: a size probe (size 0), ERANGE, or the bytes.
    static func replyXattr(_ request: fuse_req_t, _ value: [UInt8], size: Int) {
        if size == 0 {
            _ = fuse_reply_xattr(request, value.count)
        } else if value.count > size {
            _ = fuse_reply_err(request, ERANGE)
        } else {
            value.withUnsafeBufferPointer { buffer in
                buffer.withMemoryRebound(to: CChar.self) { _ = fuse_reply_buf(request, $0.baseAddress, $0.count) }
            }
        }
    }
}

extension Request {
    /// The caller's supplementary groups, as libfuse reads them from /proc
    /// (empty when it cannot, or outside a request).
    func supplementaryGroups() -> [gid_t] {
        guard let request = OpaquePointer(bitPattern: libfuseRequest) else { return [] }
        var groups = [gid_t](repeating: 0, count: 32)
        while true {
            let count = Int(fuse_req_getgroups(request, Int32(groups.count), &groups))
            if count < 0 { return [] }
            if count <= groups.count { return Array(groups.prefix(count)) }
            groups = [gid_t](repeating: 0, count: count)
        }
    }
}

extension Request {
    /// Runs `body` (a wait: a download the read needs) with `onInterrupt`
    /// called if the kernel interrupts the request meanwhile (the app got a
    /// signal), at once if it already did. libfuse calls the handler under
    /// the request's lock, which unregistering takes too: once `body`
    /// returns, the handler is not running and never will.
    public func whileInterruptible<T, E: Error>(
        _ onInterrupt: @escaping @Sendable () -> Void, _ body: () throws(E) -> T
    ) throws(E) -> T {
        guard let request = OpaquePointer(bitPattern: libfuseRequest) else { return try body() }
        let box = Unmanaged.passRetained(InterruptHandler(onInterrupt))
        fuse_req_interrupt_func(
            request, { _, data in Unmanaged<InterruptHandler>.fromOpaque(data!).takeUnretainedValue().handler() },
            box.toOpaque())
        defer {
            fuse_req_interrupt_func(request, nil, nil)
            box.release()
        }
        return try body()
    }
}

private final class InterruptHandler {
    let handler: @Sendable () -> Void
    init(_ handler: @escaping @Sendable () -> Void) { self.handler = handler }
}
