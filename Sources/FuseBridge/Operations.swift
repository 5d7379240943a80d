import CFuse3
import Glibc
import HostText
import SystemPackage

/// The libfuse operation table. Each entry is a non-capturing closure that
/// unpacks the C arguments, calls the file system once and replies once
/// (through `Bridge.answer`). Nothing here decides anything.
enum Operations {
    static func table() -> fuse_lowlevel_ops {
        var ops = fuse_lowlevel_ops()
        ops.`init` = { userdata, connection in
            guard let userdata, let connection else { return }
            Negotiation.negotiate(BridgeContext.from(userdata), connection)
        }
        entries(&ops)
        namespace(&ops)
        files(&ops)
        directories(&ops)
        xattrs(&ops)
        return ops
    }

    private static func entries(_ ops: inout fuse_lowlevel_ops) {
        ops.lookup = { req, parent, name in
            let fs = Bridge.fileSystem(req!)
            Bridge.answer(
                req!,
                { () throws(Errno) in
                    try fs.lookup(Bridge.caller(req!), parent: UInt64(parent), name: Bridge.string(name))
                }, reply: { Bridge.replyEntry(req!, $0) })
        }
        ops.forget = { req, ino, count in
            Bridge.fileSystem(req!).forget(UInt64(ino), count: count)
            fuse_reply_none(req!)
        }
        ops.forget_multi = { req, count, forgets in
            let fs = Bridge.fileSystem(req!)
            for index in 0..<count {
                let forget = forgets![index]
                fs.forget(UInt64(forget.ino), count: forget.nlookup)
            }
            fuse_reply_none(req!)
        }
        ops.getattr = { req, ino, fi in
            let fs = Bridge.fileSystem(req!)
            Bridge.answer(
                req!,
                { () throws(Errno) in
                    try fs.getattr(Bridge.caller(req!), inode: UInt64(ino), handle: fi?.pointee.fh)
                }, reply: { Bridge.replyAttributes(req!, $0) })
        }
        ops.setattr = { req, ino, attr, toSet, fi in
            let fs = Bridge.fileSystem(req!)
            Bridge.answer(
                req!,
                { () throws(Errno) in
                    try fs.setattr(
                        Bridge.changingCaller(req!), inode: UInt64(ino), changes: Bridge.changes(req!, attr, toSet),
                        handle: fi?.pointee.fh)
                }, reply: { Bridge.replyAttributes(req!, $0) })
        }
        ops.readlink = { req, ino in
            let fs = Bridge.fileSystem(req!)
            Bridge.answer(
                req!,
                { () throws(Errno) in
                    try fs.readlink(Bridge.caller(req!), inode: UInt64(ino))
                }, reply: { target in _ = target.withHostCString { fuse_reply_readlink(req!, $0) } })
        }
        ops.access = { req, ino, mask in
            let fs = Bridge.fileSystem(req!)
            Bridge.answer(req!) { () throws(Errno) in
                try fs.access(Bridge.caller(req!), inode: UInt64(ino), mask: mask)
            }
        }
        ops.statfs = { req, ino in
            let fs = Bridge.fileSystem(req!)
            Bridge.answer(
                req!,
                { () throws(Errno) in
                    try fs.statfs(Bridge.caller(req!), inode: UInt64(ino))
                },
                reply: { info in
                    var info = info
                    _ = fuse_reply_statfs(req!, &info)
                })
        }
    }

    private static func namespace(_ ops: inout fuse_lowlevel_ops) {
        ops.mknod = { req, parent, name, mode, rdev in
            let fs = Bridge.fileSystem(req!)
            Bridge.answer(
                req!,
                { () throws(Errno) in
                    try fs.mknod(
                        Bridge.caller(req!), parent: UInt64(parent), name: Bridge.string(name), mode: mode, device: rdev
                    )
                }, reply: { Bridge.replyEntry(req!, $0) })
        }
        ops.mkdir = { req, parent, name, mode in
            let fs = Bridge.fileSystem(req!)
            Bridge.answer(
                req!,
                { () throws(Errno) in
                    try fs.mkdir(Bridge.caller(req!), parent: UInt64(parent), name: Bridge.string(name), mode: mode)
                }, reply: { Bridge.replyEntry(req!, $0) })
        }
        ops.symlink = { req, target, parent, name in
            let fs = Bridge.fileSystem(req!)
            Bridge.answer(
                req!,
                { () throws(Errno) in
                    try fs.symlink(
                        Bridge.caller(req!), target: Bridge.string(target), parent: UInt64(parent),
                        name: Bridge.string(name))
                }, reply: { Bridge.replyEntry(req!, $0) })
        }
        ops.link = { req, ino, newParent, newName in
            let fs = Bridge.fileSystem(req!)
            Bridge.answer(
                req!,
                { () throws(Errno) in
                    try fs.link(
                        Bridge.caller(req!), inode: UInt64(ino), newParent: UInt64(newParent),
                        newName: Bridge.string(newName))
                }, reply: { Bridge.replyEntry(req!, $0) })
        }
        ops.unlink = { req, parent, name in
            let fs = Bridge.fileSystem(req!)
            Bridge.answer(req!) { () throws(Errno) in
                try fs.unlink(Bridge.caller(req!), parent: UInt64(parent), name: Bridge.string(name))
            }
        }
        ops.rmdir = { req, parent, name in
            let fs = Bridge.fileSystem(req!)
            Bridge.answer(req!) { () throws(Errno) in
                try fs.rmdir(Bridge.caller(req!), parent: UInt64(parent), name: Bridge.string(name))
            }
        }
        ops.rename = { req, parent, name, newParent, newName, flags in
            let fs = Bridge.fileSystem(req!)
            Bridge.answer(req!) { () throws(Errno) in
                try fs.rename(
                    Bridge.caller(req!), parent: UInt64(parent), name: Bridge.string(name),
                    newParent: UInt64(newParent), newName: Bridge.string(newName), flags: UInt32(flags))
            }
        }
    }

    private static func files(_ ops: inout fuse_lowlevel_ops) {
        ops.open = { req, ino, fi in
            let fs = Bridge.fileSystem(req!)
            Bridge.answer(
                req!,
                { () throws(Errno) in
                    try fs.open(Bridge.changingCaller(req!), inode: UInt64(ino), flags: fi!.pointee.flags)
                },
                reply: { open in
                    Bridge.replyOpen(req!, inode: UInt64(ino), open, fi!) { fuse_reply_open(req!, fi) }
                })
        }
        ops.create = { req, parent, name, mode, fi in
            let fs = Bridge.fileSystem(req!)
            Bridge.answer(
                req!,
                { () throws(Errno) in
                    try fs.create(
                        Bridge.changingCaller(req!), parent: UInt64(parent), name: Bridge.string(name), mode: mode,
                        flags: fi!.pointee.flags)
                },
                reply: { entry, open in
                    var param = Bridge.entryParam(entry, for: req!)
                    let sent = Bridge.replyOpen(req!, inode: entry.inode, open, fi!) {
                        fuse_reply_create(req!, &param, fi)
                    }
                    if !sent { fs.forget(entry.inode, count: 1) }
                })
        }
        ops.read = { req, ino, size, offset, fi in
            let fs = Bridge.fileSystem(req!)
            Bridge.answer(
                req!,
                { () throws(Errno) in
                    try fs.read(
                        Bridge.caller(req!), inode: UInt64(ino), handle: fi!.pointee.fh, offset: Int64(offset),
                        size: size)
                },
                reply: { data in
                    switch data {
                    case .descriptor(let fd, let position, let count):
                        _ = scopefs_reply_fd(req!, fd, off_t(position), count)
                    case .bytes(let bytes):
                        bytes.withUnsafeBufferPointer { buffer in
                            buffer.withMemoryRebound(to: CChar.self) {
                                _ = fuse_reply_buf(req!, $0.baseAddress, $0.count)
                            }
                        }
                    }
                })
        }
        ops.write_buf = { req, ino, bufv, offset, fi in
            let fs = Bridge.fileSystem(req!)
            Bridge.answer(
                req!,
                { () throws(Errno) in
                    let fd = try fs.writeTarget(Bridge.changingCaller(req!), inode: UInt64(ino), handle: fi!.pointee.fh)
                    defer { fs.writeFinished(inode: UInt64(ino), handle: fi!.pointee.fh) }
                    return try RefusedWrites.write(
                        bufv!, to: fd, at: offset, fromPageCache: fi!.pointee.writepage != 0, inode: UInt64(ino),
                        context: BridgeContext.from(fuse_req_userdata(req!)!))
                }, reply: { written in _ = fuse_reply_write(req!, Int(written)) })
        }
        // No flush: libfuse answers ENOSYS and the kernel stops sending FLUSH
        // on close. Writes go straight to the host file and locks are the
        // kernel's, so a close has nothing to do here but the round trip.
        ops.release = { req, ino, fi in
            let context = BridgeContext.from(fuse_req_userdata(req!)!)
            context.passthrough.released(inode: UInt64(ino), handle: fi!.pointee.fh)
            context.fileSystem.release(inode: UInt64(ino), handle: fi!.pointee.fh)
            _ = fuse_reply_err(req!, 0)
        }
        ops.fsync = { req, ino, datasync, fi in
            let fs = Bridge.fileSystem(req!)
            Bridge.answer(req!) { () throws(Errno) in
                try fs.fsync(Bridge.caller(req!), inode: UInt64(ino), handle: fi!.pointee.fh, dataOnly: datasync != 0)
            }
        }
        ops.fallocate = { req, ino, mode, offset, length, fi in
            let fs = Bridge.fileSystem(req!)
            Bridge.answer(req!) { () throws(Errno) in
                try fs.fallocate(
                    Bridge.caller(req!), inode: UInt64(ino), handle: fi!.pointee.fh, mode: mode,
                    offset: Int64(offset), length: Int64(length))
            }
        }
        ops.lseek = { req, ino, offset, whence, fi in
            let fs = Bridge.fileSystem(req!)
            Bridge.answer(
                req!,
                { () throws(Errno) in
                    try fs.lseek(
                        Bridge.caller(req!), inode: UInt64(ino), handle: fi!.pointee.fh, offset: Int64(offset),
                        whence: whence)
                }, reply: { found in _ = fuse_reply_lseek(req!, off_t(found)) })
        }
        ops.copy_file_range = { req, inIno, inOff, inFi, outIno, outOff, outFi, length, flags in
            let fs = Bridge.fileSystem(req!)
            Bridge.answer(
                req!,
                { () throws(Errno) in
                    try fs.copyFileRange(
                        Bridge.caller(req!), from: (UInt64(inIno), inFi!.pointee.fh, Int64(inOff)),
                        to: (UInt64(outIno), outFi!.pointee.fh, Int64(outOff)), length: length, flags: flags)
                }, reply: { copied in _ = fuse_reply_write(req!, copied) })
        }
    }

    private static func directories(_ ops: inout fuse_lowlevel_ops) {
        ops.opendir = { req, ino, fi in
            let fs = Bridge.fileSystem(req!)
            Bridge.answer(
                req!,
                { () throws(Errno) in
                    try fs.opendir(Bridge.caller(req!), inode: UInt64(ino))
                },
                reply: { opened in
                    fi!.pointee.fh = opened.handle
                    fi!.pointee.cache_readdir = opened.cachesListing ? 1 : 0
                    fi!.pointee.keep_cache = opened.cachesListing ? 1 : 0
                    if fuse_reply_open(req!, fi) == -ENOENT { fs.releasedir(inode: UInt64(ino), handle: opened.handle) }
                })
        }
        ops.readdir = { req, ino, size, offset, fi in
            Operations.readdir(req!, ino, size, offset, fi!, plus: false)
        }
        ops.readdirplus = { req, ino, size, offset, fi in
            Operations.readdir(req!, ino, size, offset, fi!, plus: true)
        }
        ops.releasedir = { req, ino, fi in
            Bridge.fileSystem(req!).releasedir(inode: UInt64(ino), handle: fi!.pointee.fh)
            _ = fuse_reply_err(req!, 0)
        }
        ops.fsyncdir = { req, ino, datasync, fi in
            let fs = Bridge.fileSystem(req!)
            Bridge.answer(req!) { () throws(Errno) in
                try fs.fsyncdir(
                    Bridge.caller(req!), inode: UInt64(ino), handle: fi!.pointee.fh, dataOnly: datasync != 0)
            }
        }
    }

    private static func readdir(
        _ req: fuse_req_t, _ ino: fuse_ino_t, _ size: Int, _ offset: off_t,
        _ fi: UnsafeMutablePointer<fuse_file_info>, plus: Bool
    ) {
        let fs = Bridge.fileSystem(req)
        var listing = DirectoryListing(request: req, capacity: size, isPlus: plus)
        Bridge.answer(
            req,
            { () throws(Errno) in
                try fs.readdir(
                    Bridge.caller(req), inode: UInt64(ino), handle: fi.pointee.fh, offset: Int64(offset),
                    listing: &listing)
            }, reply: { listing.reply() })
    }

    private static func xattrs(_ ops: inout fuse_lowlevel_ops) {
        ops.setxattr = { req, ino, name, value, size, flags in
            let fs = Bridge.fileSystem(req!)
            Bridge.answer(req!) { () throws(Errno) in
                try fs.setxattr(
                    Bridge.caller(req!), inode: UInt64(ino), name: Bridge.string(name),
                    value: UnsafeRawBufferPointer(start: value, count: size), flags: flags)
            }
        }
        ops.getxattr = { req, ino, name, size in
            let fs = Bridge.fileSystem(req!)
            Bridge.answer(
                req!,
                { () throws(Errno) in
                    try fs.getxattr(Bridge.caller(req!), inode: UInt64(ino), name: Bridge.string(name), size: size)
                }, reply: { Bridge.replyXattr(req!, $0, size: size) })
        }
        ops.listxattr = { req, ino, size in
            let fs = Bridge.fileSystem(req!)
            Bridge.answer(
                req!,
                { () throws(Errno) in
                    try fs.listxattr(Bridge.caller(req!), inode: UInt64(ino))
                }, reply: { Bridge.replyXattr(req!, $0, size: size) })
        }
        ops.removexattr = { req, ino, name in
            let fs = Bridge.fileSystem(req!)
            Bridge.answer(req!) { () throws(Errno) in
                try fs.removexattr(Bridge.caller(req!), inode: UInt64(ino), name: Bridge.string(name))
            }
        }
    }
}

/// The `init` request: what the file system wants from the kernel.
enum Negotiation {
    static func negotiate(_ context: BridgeContext, _ connection: UnsafeMutablePointer<fuse_conn_info>) {
        var settings = ConnectionSettings(
            maxWrite: 1 << 20, maxReadahead: connection.pointee.max_readahead, wantSplice: true, wantReaddirplus: true)
        context.fileSystem.initialize(&settings)
        // The INIT reply is built from `want` below; the wire hook adds these flags.
        context.wire.clearsSetIDBits.store(settings.clearsSetIDBits, ordering: .releasing)
        let depth = context.passthrough.negotiate(
            probe: settings.passthroughProbe, stackDepth: settings.passthroughStackDepth,
            kernelOffers: context.wire.kernelOffersPassthrough.load(ordering: .relaxed))
        context.wire.passthroughDepth.store(depth, ordering: .releasing)
        let capable = connection.pointee.capable
        var want = connection.pointee.want
        func enable(_ flag: UInt32) { if capable & flag != 0 { want |= flag } }
        func disable(_ flag: UInt32) { want &= ~flag }
        if settings.wantSplice {
            // A reply spliced to /dev/fuse cannot reach a ring entry: with
            // the ring asked for, read replies are copied (`FuseRing`).
            if !context.ring.requested {
                enable(UInt32(FUSE_CAP_SPLICE_WRITE))
                enable(UInt32(FUSE_CAP_SPLICE_MOVE))
            }
            enable(UInt32(FUSE_CAP_SPLICE_READ))
        }
        if settings.wantReaddirplus {
            enable(UInt32(FUSE_CAP_READDIRPLUS))
            enable(UInt32(FUSE_CAP_READDIRPLUS_AUTO))
        }
        enable(UInt32(FUSE_CAP_PARALLEL_DIROPS))
        // The kernel keeps POSIX and flock locks itself when the file system
        // does not take them over: every locker goes through this one mount.
        disable(UInt32(FUSE_CAP_POSIX_LOCKS))
        disable(UInt32(FUSE_CAP_FLOCK_LOCKS))
        // Cached pages are dropped explicitly (open with a changed file,
        // revocation), never because an mtime moved during our own writes.
        disable(UInt32(FUSE_CAP_AUTO_INVAL_DATA))
        // The kernel clears setuid/setgid bits with a setattr of its own.
        disable(UInt32(FUSE_CAP_HANDLE_KILLPRIV))
        disable(UInt32(FUSE_CAP_WRITEBACK_CACHE))
        connection.pointee.want = want
        connection.pointee.max_write = settings.maxWrite
        connection.pointee.max_readahead = settings.maxReadahead
        if settings.maxBackground > 0 {
            // The kernel's own ratio (12 and 9): past this many background
            // requests it counts the mount as congested and skips readahead.
            connection.pointee.max_background = settings.maxBackground
            connection.pointee.congestion_threshold = settings.maxBackground * 3 / 4
        }
    }
}
