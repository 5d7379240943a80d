"""A minimal D-Bus client (standard library only) for the document portal.

gdbus can pass a file descriptor only for a top-level `h` argument, but
folder documents need org.freedesktop.portal.Documents.AddFull, whose
first argument is an array of handles (`ah`). This module speaks just
enough of the D-Bus wire protocol for that: EXTERNAL authentication,
unix-fd negotiation, method calls with the basic types used here, and the
string-array reply.
"""

import os
import socket
import struct


class DBusError(Exception):
    pass


def _align(buf, n):
    buf.extend(b"\0" * (-len(buf) % n))


class _Writer:
    """Marshals values of a signature in little-endian order."""

    def __init__(self):
        self.buf = bytearray()

    def put(self, sig, value):
        if sig == "y":
            self.buf.append(value)
        elif sig in ("b", "u", "h"):
            _align(self.buf, 4)
            self.buf += struct.pack("<I", int(value))
        elif sig in ("s", "o"):
            data = value.encode()
            _align(self.buf, 4)
            self.buf += struct.pack("<I", len(data)) + data + b"\0"
        elif sig == "g":
            data = value.encode()
            self.buf += bytes([len(data)]) + data + b"\0"
        elif sig.startswith("a"):
            elem = sig[1:]
            _align(self.buf, 4)
            at = len(self.buf)
            self.buf += b"\0\0\0\0"
            _align(self.buf, 8 if elem[0] in "(x{td" else 4 if elem[0] in "ubhsoain" else 1)
            start = len(self.buf)
            for item in value:
                self.put(elem, item)
            struct.pack_into("<I", self.buf, at, len(self.buf) - start)
        elif sig.startswith("("):
            _align(self.buf, 8)
            for s, v in zip(_split(sig[1:-1]), value, strict=False):
                self.put(s, v)
        elif sig == "v":
            vsig, v = value
            self.put("g", vsig)
            self.put(vsig, v)
        else:
            raise ValueError("unsupported signature " + sig)


def _split(sig):
    """Splits a signature into its complete types."""
    out, i = [], 0
    while i < len(sig):
        j = i
        while sig[j] == "a":
            j += 1
        if sig[j] in "({":
            depth = 0
            while True:
                depth += sig[j] in "({"
                depth -= sig[j] in ")}"
                j += 1
                if depth == 0:
                    break
        else:
            j += 1
        out.append(sig[i:j])
        i = j
    return out


class _Reader:
    def __init__(self, data, pos=0):
        self.data, self.pos = data, pos

    def _align(self, n):
        self.pos += -self.pos % n

    def u32(self):
        self._align(4)
        (v,) = struct.unpack_from("<I", self.data, self.pos)
        self.pos += 4
        return v

    def string(self):
        n = self.u32()
        s = self.data[self.pos : self.pos + n].decode()
        self.pos += n + 1
        return s

    def sig(self):
        n = self.data[self.pos]
        s = self.data[self.pos + 1 : self.pos + 1 + n].decode()
        self.pos += n + 2
        return s

    def string_array(self):
        n = self.u32()
        end = self.pos + n
        out = []
        while self.pos < end:
            out.append(self.string())
        return out


class Connection:
    """A connection to a bus at a unix socket path."""

    def __init__(self, address):
        path = None
        for part in address.split(";")[0].split(":", 1)[1].split(","):
            key, _, value = part.partition("=")
            if key == "path":
                path = value
            elif key == "abstract":
                path = "\0" + value
        if path is None:
            raise DBusError("unsupported bus address " + address)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.serial = 0
        self.pending = b""
        self._auth()
        self.call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "Hello", "", [])

    def close(self):
        self.sock.close()

    def _line(self):
        while b"\r\n" not in self.pending:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise DBusError("bus closed the connection during authentication")
            self.pending += chunk
        line, _, self.pending = self.pending.partition(b"\r\n")
        return line.decode()

    def _auth(self):
        uid = str(os.getuid()).encode().hex()
        self.sock.sendall(b"\0AUTH EXTERNAL " + uid.encode() + b"\r\n")
        if not self._line().startswith("OK"):
            raise DBusError("EXTERNAL authentication refused")
        self.sock.sendall(b"NEGOTIATE_UNIX_FD\r\n")
        if not self._line().startswith("AGREE_UNIX_FD"):
            raise DBusError("bus does not pass file descriptors")
        self.sock.sendall(b"BEGIN\r\n")

    def _recv_exact(self, n):
        while len(self.pending) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise DBusError("bus closed the connection")
            self.pending += chunk
        out, self.pending = self.pending[:n], self.pending[n:]
        return out

    def call(self, dest, path, iface, member, sig, args, fds=()):
        """Calls a method; returns (reply signature, body bytes)."""
        self.serial += 1
        body = _Writer()
        for s, v in zip(_split(sig), args, strict=False):
            body.put(s, v)
        fields = [(1, ("o", path)), (2, ("s", iface)), (3, ("s", member)), (6, ("s", dest))]
        if sig:
            fields.append((8, ("g", sig)))
        if fds:
            fields.append((9, ("u", len(fds))))
        head = _Writer()
        head.buf += struct.pack("<cBBBII", b"l", 1, 0, 1, len(body.buf), self.serial)
        head.put("a(yv)", fields)
        _align(head.buf, 8)
        msg = bytes(head.buf + body.buf)
        if fds:
            socket.send_fds(self.sock, [msg], list(fds))
        else:
            self.sock.sendall(msg)
        return self._wait_reply(self.serial)

    def _wait_reply(self, serial):
        while True:
            fixed = self._recv_exact(16)
            if fixed[0:1] != b"l":
                raise DBusError("big-endian messages are not supported")
            mtype = fixed[1]
            body_len, _, fields_len = struct.unpack_from("<III", fixed, 4)
            rest = self._recv_exact(fields_len + (-(16 + fields_len) % 8) + body_len)
            data = fixed + rest
            r = _Reader(data, 16)
            end = 16 + fields_len
            reply_serial, rsig, errname = None, "", ""
            while r.pos < end:
                r._align(8)
                code = data[r.pos]
                r.pos += 1
                vsig = r.sig()
                if vsig in ("s", "o"):
                    val = r.string()
                elif vsig == "g":
                    val = r.sig()
                else:
                    val = r.u32()
                if code == 5:
                    reply_serial = val
                elif code == 8:
                    rsig = val
                elif code == 4:
                    errname = val
            body = data[len(data) - body_len :]
            if reply_serial != serial or mtype not in (2, 3):
                continue  # a signal or another message: not ours
            if mtype == 3:
                detail = _Reader(body).string() if rsig.startswith("s") else ""
                raise DBusError(f"{errname}: {detail}")
            return rsig, body


DOCUMENTS = (
    "org.freedesktop.portal.Documents",
    "/org/freedesktop/portal/documents",
    "org.freedesktop.portal.Documents",
)
# Flags of AddFull (document-portal/document-enums.h).
ADD_REUSE_EXISTING, ADD_PERSISTENT, ADD_AS_NEEDED_BY_APP, ADD_DIRECTORY = 1, 2, 4, 8


def add_folder_document(address, folder, app_id="", permissions=("read", "write", "grant-permissions", "delete")):
    """Exports FOLDER through the document portal; returns its document id."""
    fd = os.open(folder, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    conn = Connection(address)
    try:
        _, body = conn.call(
            *DOCUMENTS,
            "AddFull",
            "ahusas",
            [[0], ADD_REUSE_EXISTING | ADD_PERSISTENT | ADD_DIRECTORY, app_id, list(permissions)],
            fds=[fd],
        )
        return _Reader(body).string_array()[0]
    finally:
        conn.close()
        os.close(fd)


def mount_point(address):
    conn = Connection(address)
    try:
        _, body = conn.call(*DOCUMENTS, "GetMountPoint", "", [])
        r = _Reader(body)
        n = r.u32()
        return body[r.pos : r.pos + n].rstrip(b"\0").decode()
    finally:
        conn.close()
