"""Previews for tests (SPEC S50): small PNGs, and the owner's freedesktop
thumbnail cache where a local provider's previews come from
(~/.cache/thumbnails/large/MD5(URI).png, the Thumbnail Managing Standard)."""

from __future__ import annotations

import hashlib
import struct
import zlib
from pathlib import Path


def png(seed: str, side: int = 4, text: dict | None = None) -> bytes:
    """A small PNG of one colour, with tEXt chunks `text`."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    colour = hashlib.sha256(seed.encode()).digest()[:3]
    rows = b"".join(b"\0" + colour * side for _ in range(side))
    texts = b"".join(chunk(b"tEXt", k.encode() + b"\0" + v.encode()) for k, v in (text or {}).items())
    header = chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0))
    return b"\x89PNG\r\n\x1a\n" + header + texts + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def cache_preview(cache: Path, file: Path, seed: str = "preview") -> bytes:
    """Puts a valid large preview of FILE in the freedesktop cache under
    CACHE (XDG_CACHE_HOME), as a file manager makes it; returns it."""
    preview = png(seed, text={"Thumb::URI": file.as_uri(), "Thumb::MTime": str(int(file.stat().st_mtime))})
    large = cache / "thumbnails" / "large"
    large.mkdir(parents=True, exist_ok=True)
    (large / (hashlib.md5(file.as_uri().encode()).hexdigest() + ".png")).write_bytes(preview)
    return preview
