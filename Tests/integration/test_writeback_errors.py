"""Page cache coherence when the backing store refuses written pages
(issue 15 finding 4; SPEC S32, S35, S37).

Pages written through a shared mapping reach the daemon only at writeback.
When the provider's file system refuses them (ENOSPC on a full tmpfs),
`msync` reports the error, as natively (SPEC S32: errors of the backing
file system pass through). The pages must then not stay in the kernel's
cache as if they were the file's data: another process reading the file
through the mount must see what the backing file holds, not bytes that
were never stored. (Native tmpfs raises SIGBUS in the writer instead; FUSE
cannot refuse a page at the time of the store, so the refused pages are
dropped from the cache afterwards.)
"""

from __future__ import annotations

import os
import subprocess

import pytest
from scopefs_harness import ALPHA

FULL = "full"
MIB = 1 << 20

MMAP_INTO_HOLES = """
path, offset, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
start_accessing(path)
data = b"".join(b"never stored %08d\\n" % i for i in range(size // 21 + 1))[:size]
fd = os.open(path, os.O_RDWR)
m = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE, offset=offset)
m[:] = data
res = {"msync": attempt(m.flush)}
m.close()
res["fsync"] = attempt(os.fsync, fd)
os.close(fd)
emit(res)
"""

READ_RANGE = """
path, offset, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
start_accessing(path)
with open(path, "rb") as f:
    f.seek(offset)
    data = f.read(size)
emit({"hex": data.hex(), "stored": data.count(b"never stored")})
"""


@pytest.fixture
def full_provider(env):
    """A 4 MiB tmpfs, filled to its last 64 KiB, as provider `full`, with
    a sparse 4 MiB file `box/sparse` that app ALPHA may write (read-write
    grant of full:box). Unmounted (lazily: the daemon may still hold it)
    after the test."""
    top = env.root / "full-tmpfs"
    top.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m,mode=0755", "tmpfs", str(top)], check=True)
    try:
        (top / "box").mkdir()
        with open(top / "box" / "sparse", "wb") as f:
            f.truncate(4 * MIB)
        with open(top / "filler", "wb") as f:
            chunk = b"\xa5" * 65536
            try:
                while True:
                    f.write(chunk)
                    f.flush()
            except OSError:
                pass
        # Leave 64 KiB free: some of the mapping is stored, the rest refused.
        os.truncate(top / "filler", max(0, os.stat(top / "filler").st_size - 65536))
        env.cli("provider", "add", FULL, top, "--name", "Full Disk")
        env.grant(ALPHA, f"{FULL}:box")
        yield top
    finally:
        subprocess.run(["umount", "-l", str(top)], capture_output=True)


def test_refused_mmap_pages_are_not_served_to_other_processes(env, full_provider):
    env.mount()
    path = env.prov(ALPHA, FULL, "box/sparse")
    offset, size = MIB, MIB
    wrote = env.app_json(ALPHA, MMAP_INTO_HOLES, path, offset, size)
    assert "ENOSPC" in (wrote["msync"], wrote["fsync"]), (
        f"a shared mapping's pages on a full provider must fail msync/fsync with ENOSPC (SPEC S32): {wrote}"
    )

    backing = (full_provider / "box" / "sparse").read_bytes()[offset : offset + size]
    seen = env.app_json(ALPHA, READ_RANGE, path, offset, size)
    through_mount = bytes.fromhex(seen["hex"])
    assert len(through_mount) == size
    stored_lines = backing.count(b"never stored")
    assert seen["stored"] == stored_lines and through_mount == backing, (
        f"another process reads {seen['stored']} lines of data through the mount that the backing file "
        f"holds {stored_lines} of: the pages the provider refused were served from the cache "
        f"(issue 15 finding 4)"
    )
