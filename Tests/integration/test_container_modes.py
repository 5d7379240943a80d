"""Set-id bits in an app's container (issue 50, finding 4; SPEC S35).

A regular file of a container never keeps a set-id bit (a write through
kernel passthrough would not clear it), while folders, FIFOs, sockets and
devices keep what they are given, as on the backing file system: only
regular files lose them (pjdfstest in a container failed 101 cases, all
of them FIFOs and sockets whose set-id bits were stripped).
"""

from __future__ import annotations

from doc_scope_helpers import mount
from scopefs_harness import ALPHA

MODES = r"""
import socket, stat
documents = sys.argv[1]
fifo, sock, plain = (os.path.join(documents, name) for name in ("fifo", "socket", "plain.txt"))
os.mkfifo(fifo, 0o644)
os.chmod(fifo, 0o4755)
made = os.path.join(documents, "made-fifo")
os.mknod(made, stat.S_IFIFO | 0o4644)
server = socket.socket(socket.AF_UNIX)
server.bind(sock)
os.chmod(sock, 0o4755)
open(plain, "w").close()
os.chmod(plain, 0o4755)
emit({name: oct(os.lstat(os.path.join(documents, name)).st_mode & 0o7777) for name in ("fifo", "made-fifo", "socket", "plain.txt")})
"""


def test_fifos_and_sockets_keep_set_id_bits_and_regular_files_lose_them(env):
    """Issue 50.4, SPEC S35: in the container (default sandbox), chmod 04755
    of a FIFO and of a socket, and mknod of a FIFO with 04644, keep the
    setuid bit; chmod 04755 of a regular file keeps 0755."""
    mount(env)
    modes = env.app_json(ALPHA, MODES, env.container(ALPHA, "Documents"), sandbox=True)
    assert modes == {"fifo": "0o4755", "made-fifo": "0o4644", "socket": "0o4755", "plain.txt": "0o755"}, modes
