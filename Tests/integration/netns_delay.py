#!/usr/bin/env python3
"""Delays packets by a fixed time through the kernel's NFQUEUE, for kernels
without the netem qdisc (remotes.py).

    netns_delay.py QUEUE DELAY_MS

Binds netfilter queue QUEUE of the network namespace it runs in, prints
"ready" once bound, then gives every queued packet the verdict ACCEPT
DELAY_MS after it arrived, in arrival order. An nftables rule (`queue num
QUEUE`, added by remotes.py after "ready") sends the packets here. Only
the packets' metadata crosses into this process (NFQNL_COPY_META): the
kernel holds the packets meanwhile, so the cost is one message per packet
(a 64 KiB GSO packet is one), not its bytes.

Why this exists: Debian 12's cloud kernels, and the CI machine's
(CONFIG_NET_SCH_NETEM unset, no loadable modules), have no netem, and no
other qdisc delays. The protocol is netfilter's nfnetlink_queue
(linux/netfilter/nfnetlink_queue.h), spoken over a raw netlink socket so
that nothing beyond Python's standard library is needed.
"""

from __future__ import annotations

import collections
import errno
import os
import select
import signal
import socket
import struct
import sys
import time

NETLINK_NETFILTER = 12
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET = 0
NFQNL_MSG_VERDICT = 1
NFQNL_MSG_CONFIG = 2
NFQA_PACKET_HDR = 1
NFQA_VERDICT_HDR = 2
NFQA_CFG_CMD = 1
NFQA_CFG_PARAMS = 2
NFQA_CFG_QUEUE_MAXLEN = 3
NFQNL_CFG_CMD_BIND = 1
NFQNL_COPY_META = 1
NF_ACCEPT = 1
NLM_F_REQUEST = 1
NLM_F_ACK = 4
NLMSG_ERROR = 2
NLMSG_HDR = struct.Struct("=IHHII")  # length, type, flags, sequence, port
NFGENMSG = struct.Struct("=BBH")  # family, version, resource id (big-endian)
# Packets the kernel may hold for us: at 1 Gbit/s and 64 KiB packets, 1 s
# of delay is about 2,000 of them.
QUEUE_MAXLEN = 65536


def attribute(kind: int, payload: bytes) -> bytes:
    padded = payload + b"\0" * (-len(payload) % 4)
    return struct.pack("=HH", 4 + len(payload), kind) + padded


def message(kind: int, queue: int, attributes: bytes, sequence: int, flags: int = NLM_F_REQUEST) -> bytes:
    body = NFGENMSG.pack(socket.AF_UNSPEC, 0, socket.htons(queue)) + attributes
    return NLMSG_HDR.pack(NLMSG_HDR.size + len(body), (NFNL_SUBSYS_QUEUE << 8) | kind, flags, sequence, 0) + body


def attributes_of(data: bytes):
    """(type, payload) of each netlink attribute in DATA."""
    offset = 0
    while offset + 4 <= len(data):
        length, kind = struct.unpack_from("=HH", data, offset)
        if length < 4:
            return
        yield kind & 0x3FFF, data[offset + 4 : offset + length]
        offset += (length + 3) & ~3


def configure(sock: socket.socket, queue: int) -> None:
    """Binds QUEUE, metadata only, a long queue; each step acknowledged."""
    steps = [
        attribute(NFQA_CFG_CMD, struct.pack("=BxH", NFQNL_CFG_CMD_BIND, socket.htons(socket.AF_INET))),
        attribute(NFQA_CFG_PARAMS, struct.pack("!IB", 0, NFQNL_COPY_META))
        + attribute(NFQA_CFG_QUEUE_MAXLEN, struct.pack("!I", QUEUE_MAXLEN)),
    ]
    for sequence, attrs in enumerate(steps, 1):
        sock.send(message(NFQNL_MSG_CONFIG, queue, attrs, sequence, NLM_F_REQUEST | NLM_F_ACK))
        reply = sock.recv(65536)
        length, kind, _, _, _ = NLMSG_HDR.unpack_from(reply)
        if kind == NLMSG_ERROR:
            (code,) = struct.unpack_from("=i", reply, NLMSG_HDR.size)
            if code != 0:
                raise OSError(-code, f"nfqueue configuration step {sequence}: {os.strerror(-code)}")


def packet_ids(data: bytes):
    """The packet ids of the NFQNL_MSG_PACKET messages in one datagram."""
    offset = 0
    while offset + NLMSG_HDR.size <= len(data):
        length, kind, _, _, _ = NLMSG_HDR.unpack_from(data, offset)
        if length < NLMSG_HDR.size:
            return
        if kind == (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET:
            body = data[offset + NLMSG_HDR.size + NFGENMSG.size : offset + length]
            for attr, payload in attributes_of(body):
                if attr == NFQA_PACKET_HDR:
                    yield struct.unpack_from("!I", payload)[0]
        offset += (length + 3) & ~3


def main() -> int:
    queue, delay = int(sys.argv[1]), float(sys.argv[2]) / 1000
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
    sock.setsockopt(socket.SOL_SOCKET, 33, 8 << 20)  # SO_RCVBUFFORCE (root): bursts of packets
    sock.bind((0, 0))
    configure(sock, queue)
    print("ready", flush=True)
    waiting: collections.deque = collections.deque()  # (due, packet id), in arrival order
    sequence = 100
    while True:
        timeout = max(0.0, waiting[0][0] - time.monotonic()) if waiting else None
        readable, _, _ = select.select([sock], [], [], timeout)
        if readable:
            try:
                data = sock.recv(1 << 20)
            except OSError as error:
                if error.errno == errno.ENOBUFS:  # the kernel dropped messages: go on
                    continue
                raise
            arrived = time.monotonic()
            waiting.extend((arrived + delay, packet) for packet in packet_ids(data))
        now = time.monotonic()
        while waiting and waiting[0][0] <= now:
            _, packet = waiting.popleft()
            sequence += 1
            sock.send(
                message(
                    NFQNL_MSG_VERDICT,
                    queue,
                    attribute(NFQA_VERDICT_HDR, struct.pack("!II", NF_ACCEPT, packet)),
                    sequence,
                )
            )


if __name__ == "__main__":
    sys.exit(main())
