"""Content hashes: a task's identity is the hash of its directory tree."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

_SKIP = {"__pycache__", ".pytest_cache", ".git"}


def hash_tree(root: str | Path) -> str:
    """SHA-256 over relative paths, file modes (executable bit), symlink targets and file bytes.

    Returns the first 16 hex digits, prefixed ``sha256:``. Caches and VCS folders are ignored.
    """
    root = Path(root)
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP)
        rel_dir = os.path.relpath(dirpath, root)
        for name in sorted(filenames):
            full = os.path.join(dirpath, name)
            rel = os.path.normpath(os.path.join(rel_dir, name))
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                h.update(f"L {rel}\0{os.readlink(full)}\0".encode())
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            h.update(f"F {rel}\0{1 if st.st_mode & 0o111 else 0}\0{st.st_size}\0".encode())
            with open(full, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 16), b""):
                    h.update(chunk)
        for d in dirnames:
            h.update(f"D {os.path.normpath(os.path.join(rel_dir, d))}\0".encode())
    return "sha256:" + h.hexdigest()[:16]
