"""A network namespace joined to the root namespace by a veth pair, with
real network faults on the link (remotes.py puts a server behind it).

    root namespace                      namespace scopefs-remote-N
    sfr-N  10.213.a.b+1/30  <--veth-->  uplink  10.213.a.b+2/30   (server)

Faults (each reversible, all removed by ``close``):

- ``down(mode="drop")``: the namespace's end goes down; packets to and
  from it vanish, so connections time out (a cable cut beyond the host).
  Neighbour entries are permanent on both ends, so the kernel never
  answers "no route" after a failed ARP: it is a timeout, as on the
  internet. ``down(mode="unreachable")``: the host's end goes down too,
  its route goes with it, and connections fail at once with EHOSTUNREACH
  (the host's own interface is gone, as when Wi-Fi is off). ``up()``.
- ``shape(delay_ms, loss_percent, rate)``: like ``tc netem`` on the link.
  With the netem qdisc it is exactly that, on the namespace's end.
  Kernels without netem (Debian 12's cloud kernel on the project's
  machines and CI: CONFIG_NET_SCH_NETEM unset, no loadable modules) get
  the same effects from what they have: rate from the ``tbf`` qdisc on
  the namespace's end; loss from iptables' ``statistic`` match dropping
  packets the namespace sends; delay from ``netns_delay.py`` holding the
  packets the namespace receives in an NFQUEUE for ``delay_ms`` (on the
  way in, because packets held on the way out still count against the
  sender's socket, and TCP's small-queue limit then stalls it). Either
  way each round trip takes ``delay_ms`` longer, ``loss_percent`` of the
  packets the server sends are lost, and it sends at most ``rate``.
  ``method`` says which was used.

Addresses: /30 networks of 10.213.0.0/16 (16,384 of them), network N for
namespace ``scopefs-remote-N``. Creating the namespace claims N (its name
is unique on the machine), so parallel tests never share a network; a
namespace left by a dead test run whose processes are gone is taken over.
The whole /16 has an ``unreachable`` route of the lowest priority, added
once and kept: a packet for a torn-down or downed link fails at once
instead of leaving the machine by the default route.

Processes in the namespace are started with ``ip netns exec`` and
``setpriv --pdeathsig TERM`` (both exec, so the pid is the server's), so
they die with the thread that started them: start remotes from the test's
own thread, not a helper thread that ends first. Needs root, iproute2,
util-linux, and for faults without netem iptables.
"""

from __future__ import annotations

import atexit
import ctypes
import ipaddress
import json
import os
import random
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
POOL = ipaddress.ip_network("10.213.0.0/16")
NETWORKS = POOL.num_addresses // 4
NAMESPACE_PREFIX = "scopefs-remote-"
REMOTE_INTERFACE = "uplink"
OWNERS = Path("/run/scopefs-remotes")  # NAMESPACE -> "pid start-time" of the process that made it
NFQUEUE = 0
CLONE_NEWNET = 0x40000000
COMMAND_TIMEOUT = 30

_libc = ctypes.CDLL(None, use_errno=True)
_open_links: set = set()
_netem: bool | None = None  # whether the kernel has the netem qdisc, probed once


class LinkError(RuntimeError):
    """A command that sets up or changes the link failed; the message has its output."""


def run(argv: list, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [str(a) for a in argv], capture_output=True, text=True, timeout=COMMAND_TIMEOUT, stdin=subprocess.DEVNULL
    )
    if check and result.returncode != 0:
        raise LinkError(f"{' '.join(map(str, argv))} exited {result.returncode}: {result.stderr.strip()}")
    return result


def in_namespace(namespace: str, argv: list) -> list[str]:
    """ARGV run in NAMESPACE, killed (SIGTERM) when the thread that started it
    ends: `ip netns exec` and setpriv exec, so the pid is ARGV's own."""
    return ["ip", "netns", "exec", namespace, "setpriv", "--pdeathsig", "TERM", "--", *map(str, argv)]


def _process_start(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[19]
    except (OSError, IndexError):
        return None


def _owner_alive(namespace: str) -> bool:
    try:
        pid, start = (OWNERS / namespace).read_text().split()
    except (OSError, ValueError):
        return False
    return _process_start(int(pid)) == start


def namespaces() -> list[str]:
    return [line.split()[0] for line in run(["ip", "netns", "list"]).stdout.splitlines() if line.strip()]


def interface_exists(name: str, namespace: str | None = None) -> bool:
    return (
        run(["ip", *(["-n", namespace] if namespace else []), "link", "show", "dev", name], check=False).returncode == 0
    )


def _guard_pool() -> None:
    """The pool's last-resort route: nothing for it ever leaves the machine."""
    run(["ip", "route", "replace", "unreachable", str(POOL), "metric", "4294967295"])


def netem_supported(namespace: str) -> bool:
    """Whether the kernel has the netem qdisc (tried once, on a fresh link)."""
    global _netem
    if _netem is None:
        tried = run(
            ["tc", "-n", namespace, "qdisc", "add", "dev", REMOTE_INTERFACE, "root", "netem", "delay", "0ms"],
            check=False,
        )
        _netem = tried.returncode == 0
        if _netem:
            run(["tc", "-n", namespace, "qdisc", "del", "dev", REMOTE_INTERFACE, "root"])
    return _netem


class Link:
    """A fresh namespace and its veth pair; ``close()`` removes both."""

    def __init__(self):
        if os.geteuid() != 0:
            raise LinkError("network namespaces need root")
        _guard_pool()
        self.index = self._claim()
        self.namespace = f"{NAMESPACE_PREFIX}{self.index}"
        self.host_interface = f"sfr-{self.index}"
        network = ipaddress.ip_network(f"{POOL.network_address + 4 * self.index}/30")
        self.host_address, self.remote_address = str(network[1]), str(network[2])
        self.network = network
        self.state = "up"
        self.method = None  # "netem" or "tbf+iptables+nfqueue" once shaped
        self._delayer: subprocess.Popen | None = None
        self._admin: ThreadPoolExecutor | None = None
        _open_links.add(self)
        try:
            self._wire()
        except BaseException:
            self.close()
            raise

    # -- set-up ---------------------------------------------------------------

    def _claim(self) -> int:
        """A free network: its namespace's name is the claim."""
        OWNERS.mkdir(parents=True, exist_ok=True)
        first = random.randrange(NETWORKS)
        for step in range(NETWORKS):
            index = (first + step) % NETWORKS
            namespace = f"{NAMESPACE_PREFIX}{index}"
            made = run(["ip", "netns", "add", namespace], check=False)
            if made.returncode != 0:
                if "File exists" not in made.stderr:
                    raise LinkError(f"ip netns add {namespace}: {made.stderr.strip()}")
                if not self._take_over(index):
                    continue
            (OWNERS / namespace).write_text(f"{os.getpid()} {_process_start(os.getpid())}\n")
            return index
        raise LinkError(f"every network of {POOL} is taken")

    @staticmethod
    def _take_over(index: int) -> bool:
        """Removes a namespace left by a dead test run if nothing runs in it."""
        namespace = f"{NAMESPACE_PREFIX}{index}"
        if _owner_alive(namespace) or run(["ip", "netns", "pids", namespace], check=False).stdout.strip():
            return False
        run(["ip", "link", "del", f"sfr-{index}"], check=False)
        run(["ip", "netns", "del", namespace], check=False)
        return run(["ip", "netns", "add", namespace], check=False).returncode == 0

    def _wire(self) -> None:
        ns = ["ip", "-n", self.namespace]
        run(
            [
                "ip",
                "link",
                "add",
                self.host_interface,
                "type",
                "veth",
                "peer",
                "name",
                REMOTE_INTERFACE,
                "netns",
                self.namespace,
            ]
        )
        run(["ip", "addr", "add", f"{self.host_address}/30", "dev", self.host_interface])
        run([*ns, "addr", "add", f"{self.remote_address}/30", "dev", REMOTE_INTERFACE])
        run(["ip", "link", "set", self.host_interface, "up"])
        run([*ns, "link", "set", REMOTE_INTERFACE, "up"])
        run([*ns, "link", "set", "lo", "up"])
        self._pin_neighbours()

    def _mac(self, interface: str, namespace: str | None = None) -> str:
        shown = run(["ip", "-j", *(["-n", namespace] if namespace else []), "link", "show", "dev", interface])
        return json.loads(shown.stdout)[0]["address"]

    def _pin_neighbours(self) -> None:
        """Permanent ARP entries: a downed link drops packets, it never makes
        the kernel give up on the neighbour (EHOSTUNREACH after 3 s)."""
        host_mac = self._mac(self.host_interface)
        remote_mac = self._mac(REMOTE_INTERFACE, self.namespace)
        run(
            [
                "ip",
                "neigh",
                "replace",
                self.remote_address,
                "lladdr",
                remote_mac,
                "dev",
                self.host_interface,
                "nud",
                "permanent",
            ]
        )
        run(
            [
                "ip",
                "-n",
                self.namespace,
                "neigh",
                "replace",
                self.host_address,
                "lladdr",
                host_mac,
                "dev",
                REMOTE_INTERFACE,
                "nud",
                "permanent",
            ]
        )

    # -- processes in the namespace -------------------------------------------

    def popen(self, argv: list, log: Path, env: dict | None = None, **kwargs) -> subprocess.Popen:
        """ARGV in the namespace; its pid is ARGV's (ip netns exec execs)."""
        with open(log, "ab") as out:
            return subprocess.Popen(
                in_namespace(self.namespace, argv),
                stdin=subprocess.DEVNULL,
                stdout=kwargs.pop("stdout", out),
                stderr=out,
                env={**os.environ, **(env or {})},
                **kwargs,
            )

    def inside(self, function, *args, timeout: float = 60, **kwargs):
        """Calls FUNCTION in a thread of this process that lives in the
        namespace: its sockets reach the server on the namespace's loopback,
        whatever the link's state (for changes made behind a test's back)."""
        if self._admin is None:
            self._admin = ThreadPoolExecutor(max_workers=1, initializer=self._enter)
        return self._admin.submit(function, *args, **kwargs).result(timeout)

    def _enter(self) -> None:
        fd = os.open(f"/run/netns/{self.namespace}", os.O_RDONLY)
        try:
            if _libc.setns(fd, CLONE_NEWNET) != 0:
                code = ctypes.get_errno()
                raise OSError(code, f"setns {self.namespace}: {os.strerror(code)}")
        finally:
            os.close(fd)

    # -- faults ---------------------------------------------------------------

    def down(self, mode: str = "drop") -> None:
        if mode not in ("drop", "unreachable"):
            raise ValueError(f"mode is 'drop' or 'unreachable', not {mode!r}")
        run(["ip", "-n", self.namespace, "link", "set", REMOTE_INTERFACE, "down"])
        if mode == "unreachable":
            run(["ip", "link", "set", self.host_interface, "down"])
        self.state = f"down ({mode})"

    def up(self) -> None:
        run(["ip", "link", "set", self.host_interface, "up"])
        run(["ip", "-n", self.namespace, "link", "set", REMOTE_INTERFACE, "up"])
        self._pin_neighbours()  # a downed interface loses its neighbour entries
        self.state = "up"

    def shape(self, delay_ms: float = 0, loss_percent: float = 0, rate: str | int | None = None) -> None:
        """Replaces the link's faults with these (none: a clean link again)."""
        if delay_ms < 0 or not 0 <= loss_percent <= 100:
            raise ValueError("delay_ms >= 0 and 0 <= loss_percent <= 100")
        self._unshape()
        if not (delay_ms or loss_percent or rate):
            return
        rate = f"{rate}bit" if isinstance(rate, int) else rate
        if netem_supported(self.namespace):
            self.method = "netem"
            spec = (["delay", f"{delay_ms}ms"] if delay_ms else []) + (
                ["loss", f"{loss_percent}%"] if loss_percent else []
            )
            spec += ["rate", rate] if rate else []
            run(
                [
                    "tc",
                    "-n",
                    self.namespace,
                    "qdisc",
                    "replace",
                    "dev",
                    REMOTE_INTERFACE,
                    "root",
                    "netem",
                    *spec,
                    "limit",
                    "100000",
                ]
            )
            return
        self.method = "tbf+iptables+nfqueue"
        if rate:
            burst = max(32 * 1024, _bits_per_second(rate) // 8 // 100)  # at least 10 ms of data
            run(
                [
                    "tc",
                    "-n",
                    self.namespace,
                    "qdisc",
                    "replace",
                    "dev",
                    REMOTE_INTERFACE,
                    "root",
                    "tbf",
                    "rate",
                    rate,
                    "burst",
                    burst,
                    "latency",
                    "2s",
                ]
            )
        if loss_percent:
            self._iptables(
                "-A",
                "OUTPUT",
                "-o",
                REMOTE_INTERFACE,
                "-m",
                "statistic",
                "--mode",
                "random",
                "--probability",
                f"{loss_percent / 100:.6f}",
                "-j",
                "DROP",
            )
        if delay_ms:
            self._start_delayer(delay_ms)
            self._iptables("-A", "INPUT", "-i", REMOTE_INTERFACE, "-j", "NFQUEUE", "--queue-num", NFQUEUE)

    def _iptables(self, *args) -> None:
        run(["ip", "netns", "exec", self.namespace, "iptables", "-w", *args])

    def _start_delayer(self, delay_ms: float) -> None:
        self._delayer = subprocess.Popen(
            in_namespace(self.namespace, [sys.executable, HERE / "netns_delay.py", NFQUEUE, delay_ms]),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        ready = _readline(self._delayer.stdout, 10)
        if ready != "ready\n":
            self._stop(self._delayer)
            raise LinkError(f"netns_delay.py did not start: {self._delayer.stderr.read().strip()}")

    def _unshape(self) -> None:
        if self.method is None:
            return
        run(["tc", "-n", self.namespace, "qdisc", "del", "dev", REMOTE_INTERFACE, "root"], check=False)
        if self.method != "netem":
            self._iptables("-F", "INPUT")
            self._iptables("-F", "OUTPUT")
            self._stop(self._delayer)
            self._delayer = None
        self.method = None

    # -- teardown -------------------------------------------------------------

    @staticmethod
    def _stop(process: subprocess.Popen | None) -> None:
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def pids(self) -> list[int]:
        """Processes running in the namespace."""
        return [int(p) for p in run(["ip", "netns", "pids", self.namespace], check=False).stdout.split()]

    def close(self) -> list[str]:
        """Removes the link and the namespace; what could not be removed."""
        if self not in _open_links:
            return []
        _open_links.discard(self)
        if self._admin is not None:
            self._admin.shutdown(wait=True)
        self._stop(self._delayer)
        problems = []
        run(["ip", "link", "del", self.host_interface], check=False)
        left = self.pids()
        if left:
            problems.append(f"processes still in {self.namespace}: {left}")
        run(["ip", "netns", "del", self.namespace], check=False)
        (OWNERS / self.namespace).unlink(missing_ok=True)
        if self.namespace in namespaces():
            problems.append(f"namespace {self.namespace} is still there")
        if interface_exists(self.host_interface):
            problems.append(f"interface {self.host_interface} is still there")
        return problems


def _bits_per_second(rate: str) -> int:
    """tc's rate syntax ("8mbit", "1gbit", "500kbit", "100kbps") in bits per second."""
    units = {"bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9, "bps": 8, "kbps": 8 * 10**3, "mbps": 8 * 10**6}
    text = rate.strip().lower()
    for unit in sorted(units, key=len, reverse=True):
        if text.endswith(unit):
            return int(float(text[: -len(unit)]) * units[unit])
    return int(text)


def _readline(stream, timeout: float) -> str:
    """One line from STREAM, or "" after TIMEOUT seconds."""
    line: list = []
    reader = threading.Thread(target=lambda: line.append(stream.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    return line[0] if line else ""


@atexit.register
def _close_leftovers() -> None:
    """A safety net for links a crashed test never closed."""
    for link in list(_open_links):
        try:
            link.close()
        except (LinkError, OSError, subprocess.SubprocessError):
            pass  # at exit: the next claim of its network takes it over
