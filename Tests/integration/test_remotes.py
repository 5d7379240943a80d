"""The remotes that provider-extension tests use (remotes.py, issue 32):
each server answers over its own link, the link's faults are real (a
downed link times out, delay and rate slow requests, loss drops packets),
changes made behind a test's back reach the server whatever the link's
state, and teardown leaves nothing behind. Then the S3 extension itself
(extensions/s3/scopefs_s3.py) runs over a namespaced store and fails
cleanly, as ``unreachable``, while the link is down.

No ScopeFS mount here: these check the test equipment the extension tests
stand on.
"""

from __future__ import annotations

import errno
import ipaddress
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
from netns_link import NAMESPACE_PREFIX, OWNERS, POOL, Link, interface_exists, namespaces
from remotes import S3Remote
from scopefs_harness import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "Tests" / "extensions"))
from conformance import ExtensionProcess, RpcError, check_item, check_staged  # noqa: E402 - beside the suite

S3_EXTENSION = REPO_ROOT / "extensions" / "s3" / "scopefs_s3.py"
UNREACHABLE = -32004  # docs/PROVIDERS.md "Errors"
PATIENCE = 2.0  # seconds a request may take before a test calls the link dead


def elapsed(action):
    """(seconds, result or the exception raised) of ACTION."""
    began = time.monotonic()
    try:
        result = action()
    except Exception as error:  # the caller looks at which
        result = error
    return time.monotonic() - began, result


def fetch(url: str, timeout: float = PATIENCE) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as answer:
        return answer.read()


def moto_status(remote: S3Remote):
    """A fresh connection and one request to the server, from the host."""
    return elapsed(lambda: fetch(remote.url + "/moto-api/"))


def rclone(remote, *args, timeout: float = 60) -> subprocess.CompletedProcess:
    """rclone on the host, over the link; short timeouts so a dead link fails fast."""
    return subprocess.run(
        ["rclone", "--contimeout", "2s", "--timeout", "3s", "--low-level-retries", "1", "--retries", "1", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **remote.env},
    )


def test_each_remote_answers_over_a_link_of_its_own(remotes):
    s3, webdav, sftp = remotes.s3(), remotes.webdav(), remotes.sftp()
    made = [s3, webdav, sftp]
    assert len({r.link.namespace for r in made}) == 3 and len({r.link.network for r in made}) == 3
    for remote in made:
        assert ipaddress.ip_address(remote.address) in POOL
        assert remote.link.namespace in namespaces() and interface_exists(remote.link.host_interface)
    s3.put("behind/the-back.txt", b"written inside the namespace")
    host = s3.client()
    assert (
        host.get_object(Bucket=s3.bucket, Key="behind/the-back.txt")["Body"].read() == b"written inside the namespace"
    )
    host.put_object(Bucket=s3.bucket, Key="from-the-host.txt", Body=b"over the link")
    assert s3.get("from-the-host.txt") == b"over the link"
    assert sorted(s3.keys()) == ["behind/the-back.txt", "from-the-host.txt"]
    for remote in (webdav, sftp):
        (remote.folder / "served.txt").write_bytes(b"in the served folder")
        listed = rclone(remote, "lsf", remote.remote)
        assert listed.returncode == 0 and listed.stdout.split() == ["served.txt"], listed.stderr
        sent = subprocess.run(
            ["rclone", "rcat", remote.remote + "uploaded.txt"],
            input="over the link",
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, **remote.env},
        )
        assert sent.returncode == 0, sent.stderr
        assert (remote.folder / "uploaded.txt").read_text() == "over the link"


def test_a_downed_link_times_out_and_recovers_when_up(s3_remote):
    assert isinstance(moto_status(s3_remote)[1], bytes)
    s3_remote.link_down()
    seconds, result = moto_status(s3_remote)
    assert isinstance(result, urllib.error.URLError) and isinstance(result.reason, TimeoutError), result
    assert seconds >= PATIENCE, "a dropped link is silence, not a refusal"
    s3_remote.put("changed-while-down.txt", b"behind the back")  # the namespace's loopback still works
    s3_remote.link_up()
    seconds, result = moto_status(s3_remote)
    assert isinstance(result, bytes), result
    assert s3_remote.client().get_object(Bucket=s3_remote.bucket, Key="changed-while-down.txt")["Body"].read() == (
        b"behind the back"
    )


def test_an_unreachable_link_fails_at_once_and_recovers(s3_remote):
    s3_remote.link_down("unreachable")
    seconds, result = moto_status(s3_remote)
    assert isinstance(result, urllib.error.URLError) and getattr(result.reason, "errno", None) == errno.EHOSTUNREACH
    assert seconds < PATIENCE
    s3_remote.link_up()
    assert isinstance(moto_status(s3_remote)[1], bytes)


def test_delay_lengthens_every_round_trip(s3_remote):
    delay = 0.3
    s3_remote.netem(delay_ms=delay * 1000)
    assert s3_remote.link.method in ("netem", "tbf+iptables+nfqueue")
    seconds, result = moto_status(s3_remote)
    assert isinstance(result, bytes), result
    # Two round trips: the connection's handshake, then the request.
    assert seconds >= 2 * delay, f"{seconds:.3f} s with {delay} s of delay per round trip"
    s3_remote.netem()
    assert isinstance(moto_status(s3_remote)[1], bytes)


def test_loss_drops_what_the_server_sends(s3_remote):
    s3_remote.netem(loss_percent=100)
    seconds, result = moto_status(s3_remote)
    assert isinstance(result, urllib.error.URLError) and isinstance(result.reason, TimeoutError), result
    s3_remote.netem(loss_percent=20)
    host = s3_remote.client()
    s3_remote.put("lossy.bin", os.urandom(256 * 1024))
    assert len(host.get_object(Bucket=s3_remote.bucket, Key="lossy.bin")["Body"].read()) == 256 * 1024, (
        "TCP carries a lossy link's data through"
    )
    s3_remote.netem()
    assert isinstance(moto_status(s3_remote)[1], bytes)


def test_rate_limits_what_the_server_sends(s3_remote):
    size, bits_per_second = 1 << 20, 4_000_000
    s3_remote.put("one-mib.bin", os.urandom(size))
    s3_remote.netem(rate="4mbit")
    host = s3_remote.client()
    seconds, result = elapsed(lambda: host.get_object(Bucket=s3_remote.bucket, Key="one-mib.bin")["Body"].read())
    assert isinstance(result, bytes) and len(result) == size, result
    # The shaper lets a burst of up to 32 KiB through at once.
    floor = (size - 32 * 1024) * 8 / bits_per_second
    assert seconds >= floor, f"1 MiB in {seconds:.2f} s at 4 Mbit/s (at least {floor:.2f} s)"


@pytest.mark.parametrize("kind", ["webdav", "sftp"])
def test_rclone_remotes_time_out_while_down_and_see_the_folder_after(remotes, kind):
    remote = getattr(remotes, kind)()
    remote.link_down()
    seconds, listed = elapsed(lambda: rclone(remote, "lsf", remote.remote))
    assert listed.returncode != 0 and "timeout" in listed.stderr, listed.stderr[-500:]
    (remote.folder / "written-while-down.txt").write_bytes(b"behind the back")
    remote.link_up()
    listed = rclone(remote, "lsf", remote.remote)
    assert listed.returncode == 0 and listed.stdout.split() == ["written-while-down.txt"], listed.stderr[-500:]


def test_teardown_removes_server_namespace_and_link_even_after_a_failure(tmp_path):
    class Failure(Exception):
        pass

    with pytest.raises(Failure):
        with S3Remote(tmp_path / "remote") as remote:
            remote.netem(delay_ms=50)  # a delayer process too, where the kernel has no netem
            server, delayer = remote.server.pid, remote.link._delayer
            namespace, interface, address = remote.link.namespace, remote.link.host_interface, remote.address
            raise Failure
    assert remote.server.poll() is not None, f"server {server} still runs"
    assert delayer is None or delayer.poll() is not None, "the delayer still runs"
    assert namespace not in namespaces()
    assert not interface_exists(interface)
    assert not os.path.exists(f"/run/scopefs-remotes/{namespace}")
    # A packet for the old address fails here; it never takes the default route out.
    seconds, result = elapsed(lambda: fetch(f"http://{address}:5000/"))
    assert isinstance(result, urllib.error.URLError) and getattr(result.reason, "errno", None) == errno.EHOSTUNREACH


@pytest.fixture
def extension(tmp_path):
    """The S3 extension as a child process speaking docs/PROVIDERS.md."""
    processes = []

    def start(remote: S3Remote) -> ExtensionProcess:
        staging = tmp_path / f"staging-{len(processes)}"
        staging.mkdir()
        process = ExtensionProcess(
            [sys.executable, str(S3_EXTENSION)], staging, tmp_path / f"s3-{len(processes)}.log", remote.env
        )
        processes.append(process)
        process.initialize(options=remote.options)
        return process

    yield start
    for process in processes:
        assert process.shutdown() == 0, process.log_tail()
        assert process.violations == []


def test_the_s3_extension_works_over_the_link_and_is_unreachable_while_it_is_down(s3_remote, extension):
    s3_remote.put("docs/report.txt", b"quarterly numbers")
    process = extension(s3_remote)
    assert [item["name"] for item in process.call("list", {"id": "root"})["items"]] == ["docs"]
    item = check_item(process.call("item", {"id": "/docs/report.txt"}))
    assert item["size"] == len(b"quarterly numbers")
    fetched = process.call("fetch", {"id": "/docs/report.txt"})
    assert check_staged(fetched["path"], process.staging) == b"quarterly numbers"

    s3_remote.link_down("unreachable")
    for method, params in [("list", {"id": "/docs/"}), ("fetch", {"id": "/docs/report.txt"})]:
        with pytest.raises(RpcError) as raised:
            process.call(method, params, timeout=30)
        assert raised.value.code == UNREACHABLE, (method, raised.value.message)
    s3_remote.put("docs/added-while-down.txt", b"new")
    s3_remote.link_up()
    names = [entry["name"] for entry in process.call("list", {"id": "/docs/"})["items"]]
    assert sorted(names) == ["added-while-down.txt", "report.txt"]


def test_a_namespace_left_by_a_dead_run_is_taken_over_and_a_live_ones_is_not(tmp_path):
    with S3Remote(tmp_path / "live") as live:
        assert not Link._take_over(live.link.index), "a namespace whose owner runs is not taken"
        assert live.link.namespace in namespaces() and isinstance(moto_status(live)[1], bytes)
    index = live.link.index  # free again: stand in for a crashed run's leftover
    namespace = f"{NAMESPACE_PREFIX}{index}"
    subprocess.run(["ip", "netns", "add", namespace], check=True)
    finished = subprocess.Popen(["true"])
    finished.wait()
    (OWNERS / namespace).write_text(f"{finished.pid} 0\n")
    try:
        assert Link._take_over(index), "nothing runs in it and its owner is gone"
        assert namespace in namespaces(), "taken over: made anew for the new owner"
    finally:
        subprocess.run(["ip", "netns", "del", namespace], check=False)
        (OWNERS / namespace).unlink(missing_ok=True)
