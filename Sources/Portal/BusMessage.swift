import CPortalBus
import Glibc
import HostText

/// Reads a method call's arguments in order. sd-bus checked the signature
/// against the vtable already, so a failed read is a broken message.
struct ArgumentReader {
    let message: OpaquePointer

    private func check(_ result: Int32) throws(PortalError) {
        if result < 0 { throw .invalidArgument("malformed arguments (\(String(cString: strerror(-result))))") }
    }

    private func type(_ code: Character) -> CChar { CChar(code.asciiValue!) }

    func descriptor() throws(PortalError) -> Int32 {
        var fd: Int32 = -1
        try check(sd_bus_message_read_basic(message, type("h"), &fd))
        return fd
    }

    func bool() throws(PortalError) -> Bool {
        var value: Int32 = 0
        try check(sd_bus_message_read_basic(message, type("b"), &value))
        return value != 0
    }

    func uint32() throws(PortalError) -> UInt32 {
        var value: UInt32 = 0
        try check(sd_bus_message_read_basic(message, type("u"), &value))
        return value
    }

    func string() throws(PortalError) -> String {
        var pointer: UnsafePointer<CChar>?
        try check(sd_bus_message_read_basic(message, type("s"), &pointer))
        return pointer.map { String(cString: $0) } ?? ""
    }

    /// An `ay` the portal uses for paths: bytes, maybe NUL-terminated.
    func path() throws(PortalError) -> String {
        var pointer: UnsafeRawPointer?
        var size = 0
        try check(sd_bus_message_read_array(message, type("y"), &pointer, &size))
        var bytes = pointer.map { Array(UnsafeRawBufferPointer(start: $0, count: size)) } ?? []
        if bytes.last == 0 { bytes.removeLast() }
        guard !bytes.contains(0) else { throw .invalidArgument("a path holds a NUL byte") }
        // Names are bytes (SPEC S33a): kept losslessly, whatever their encoding.
        return HostName.string(bytes)
    }

    func strings() throws(PortalError) -> [String] {
        try check(sd_bus_message_enter_container(message, type("a"), "s"))
        var values: [String] = []
        while true {
            var pointer: UnsafePointer<CChar>?
            let result = sd_bus_message_read_basic(message, type("s"), &pointer)
            try check(result)
            guard result > 0, let pointer else { break }
            values.append(String(cString: pointer))
        }
        try check(sd_bus_message_exit_container(message))
        return values
    }

    func descriptors() throws(PortalError) -> [Int32] {
        try check(sd_bus_message_enter_container(message, type("a"), "h"))
        var values: [Int32] = []
        while true {
            var fd: Int32 = -1
            let result = sd_bus_message_read_basic(message, type("h"), &fd)
            try check(result)
            guard result > 0 else { break }
            values.append(fd)
        }
        try check(sd_bus_message_exit_container(message))
        return values
    }
}

/// Builds a method return; every append's failure is ENOMEM, which ends
/// the call with an error instead of a half-written reply.
final class ReplyWriter {
    let reply: OpaquePointer

    init(replyingTo call: OpaquePointer) throws(PortalError) {
        var reply: OpaquePointer?
        guard sd_bus_message_new_method_return(call, &reply) >= 0, let reply else {
            throw .failed("cannot build a reply")
        }
        self.reply = reply
    }

    deinit { sd_bus_message_unref(reply) }

    private func check(_ result: Int32) throws(PortalError) {
        if result < 0 { throw .failed("cannot build a reply (\(String(cString: strerror(-result))))") }
    }

    private func type(_ code: Character) -> CChar { CChar(code.asciiValue!) }

    func string(_ value: String) throws(PortalError) {
        try check(value.withCString { sd_bus_message_append_basic(reply, type("s"), $0) })
    }

    /// A path as the portal sends it: `ay` with a closing NUL.
    func path(_ value: String) throws(PortalError) {
        let bytes = value.hostBytes + [0]
        try check(bytes.withUnsafeBytes { sd_bus_message_append_array(reply, type("y"), $0.baseAddress, $0.count) })
    }

    func uint32(_ value: UInt32) throws(PortalError) {
        var value = value
        try check(sd_bus_message_append_basic(reply, type("u"), &value))
    }

    func strings(_ values: [String]) throws(PortalError) {
        try container("a", "s") { () throws(PortalError) in for value in values { try string(value) } }
    }

    func container(_ kind: Character, _ contents: String, _ body: () throws(PortalError) -> Void)
        throws(PortalError)
    {
        try check(sd_bus_message_open_container(reply, type(kind), contents))
        try body()
        try check(sd_bus_message_close_container(reply))
    }

    /// `a{say}`: document ids to paths.
    func pathsByID(_ paths: [String: String]) throws(PortalError) {
        try container("a", "{say}") { () throws(PortalError) in
            for (id, path) in paths.sorted(by: { $0.key < $1.key }) {
                try container("e", "say") { () throws(PortalError) in
                    try string(id)
                    try self.path(path)
                }
            }
        }
    }

    /// `a{sv}` holding only `mountpoint` (ay), AddFull's extra output.
    func mountPointExtra(_ mountPoint: String) throws(PortalError) {
        try container("a", "{sv}") { () throws(PortalError) in
            try container("e", "sv") { () throws(PortalError) in
                try string("mountpoint")
                try container("v", "ay") { () throws(PortalError) in try path(mountPoint) }
            }
        }
    }

    func send() throws(PortalError) {
        try check(sd_bus_send(nil, reply, nil))
    }
}
