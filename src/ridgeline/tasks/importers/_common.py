"""Helpers shared by the importers: deterministic copies, Dockerfile environments, script notes."""

from __future__ import annotations

import glob
import os
import posixpath
import re
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

from ridgeline.tasks.importers import SkipTask
from ridgeline.tasks.importers._dockerfile import DockerPlan

#: Commands in a test or setup script that fetch software or data (they need the internet, or an
#: image that already has what they fetch).
_FETCHES = re.compile(
    r"\b(?:apt-get|apt|apk|yum|dnf)\s+(?:-\S+\s+)*install\b|\bpip3?\s+install\b|\buv\s+(?:pip|add|sync|run)\b"
    r"|\buvx\b|\bcurl\b|\bwget\b|\bnpm\s+(?:install|ci)\b|\bgit\s+clone\b"
)


def write_text(path: Path, text: str, *, executable: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    path.chmod(0o755 if executable else 0o644)


def _copy_file(src: Path, dest: Path, mode: int | None = None) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.is_symlink() or dest.is_file():
        dest.unlink()
    elif dest.is_dir():
        shutil.rmtree(dest)
    if src.is_symlink():
        os.symlink(os.readlink(src), dest)
        return
    shutil.copyfile(src, dest)
    if mode is None:
        mode = 0o755 if os.stat(src).st_mode & 0o111 else 0o644
    dest.chmod(mode)


#: Caches and VCS folders: never part of a task.
_NEVER_COPIED = frozenset({"__pycache__", ".pytest_cache", ".git"})


def copy_tree(
    src: Path, dest: Path, *, skip: Callable[[Path], bool] | None = None, mode: int | None = None
) -> None:
    """Copy the contents of ``src`` into ``dest`` (merging), in sorted order; ``skip(path)`` leaves a
    file or folder out, and so are caches. Symlinks are copied as links, modes normalised to
    0644/0755 (or ``mode``)."""
    dest.mkdir(parents=True, exist_ok=True)
    for entry in sorted(src.iterdir()):
        if entry.name in _NEVER_COPIED or (skip is not None and skip(entry)):
            continue
        if entry.is_dir() and not entry.is_symlink():
            copy_tree(entry, dest / entry.name, skip=skip, mode=mode)
        else:
            _copy_file(entry, dest / entry.name, mode)


def find_task_dirs(src: Path, marker: str) -> list[Path]:
    """``src`` itself when it holds ``marker``, else every folder below it that does (outermost only)."""
    if (src / marker).is_file():
        return [src]
    found: list[Path] = []
    for f in sorted(src.rglob(marker)):
        d = f.parent
        if f.is_file() and not any(d.is_relative_to(p) for p in found):
            found.append(d)
    return found


def fetch_note(script: Path, label: str) -> list[str]:
    """A note when ``script`` downloads or installs software (it will fail offline)."""
    try:
        text = script.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    m = _FETCHES.search(text)
    if m is None:
        return []
    return [
        f"{label} fetches software ({m.group(0).strip()!r}); offline it works only if the sandbox "
        "already has what it fetches"
    ]


def _inside(path: str, root: str) -> bool:
    return root == "/" or path == root or path.startswith(root.rstrip("/") + "/")


def check_local(plan: DockerPlan, workdir: str) -> None:
    """Add to ``plan.reasons`` whatever the local backend cannot place: it seeds the workdir only."""
    for c in plan.copies:
        if not _inside(c.dest, workdir):
            plan.reasons.append(
                f"COPY to {c.dest} (line {c.lineno}) lies outside the workdir {workdir}; "
                "the local backend seeds the workdir only"
            )
    for d in plan.mkdirs:
        if not _inside(d, workdir):
            plan.reasons.append(f"RUN mkdir {d} lies outside the workdir {workdir}")


def _sources(context: Path, pattern: str, lineno: int) -> list[Path]:
    rel = pattern.lstrip("/") or "."
    root = context.resolve()
    if glob.has_magic(rel):
        matches = sorted(Path(p) for p in glob.glob(str(context / rel)))
    else:
        matches = [context / rel] if (context / rel).exists() or (context / rel).is_symlink() else []
    if not matches:
        raise SkipTask(f"COPY source {pattern!r} (line {lineno}) is not in the build context")
    for m in matches:
        if not (m.parent.resolve() / m.name).is_relative_to(root):
            raise SkipTask(f"COPY source {pattern!r} (line {lineno}) lies outside the build context")
    return matches


def write_local_environment(
    plan: DockerPlan, context: Path, env_dir: Path, workdir: str, *, exclude: Iterable[str] = ()
) -> None:
    """Place the plan's COPY sources under ``env_dir/files`` (relative to ``workdir``) and its
    ``mkdir``s in ``env_dir/setup.sh``. Directory copies leave out ``exclude`` (paths relative to the
    context: the source task's own machinery, such as its tests).

    Raises:
        SkipTask: a COPY source is missing or lies outside the build context.
    """
    files = env_dir / "files"
    root = context.resolve()
    excluded = {(root / e).resolve() for e in exclude}

    def skip(p: Path) -> bool:
        return p.resolve() in excluded

    for c in plan.copies:
        for src in (s for pattern in c.sources for s in _sources(context, pattern, c.lineno)):
            is_dir = src.is_dir() and not src.is_symlink()
            target = c.dest if (is_dir or not c.dest_is_dir) else posixpath.join(c.dest, src.name)
            rel = posixpath.relpath(target, workdir)
            if rel == "." and not is_dir:
                raise SkipTask(f"COPY at line {c.lineno} copies a file onto the workdir {workdir} itself")
            dest = files if rel == "." else files / rel
            if is_dir:
                copy_tree(src, dest, skip=skip, mode=c.chmod)
            else:
                _copy_file(src, dest, c.chmod)
    if plan.mkdirs:
        lines = ["#!/bin/sh", "# Folders the source Dockerfile created with RUN mkdir.", "set -e"]
        lines += [f"mkdir -p '{d}'" for d in plan.mkdirs]
        write_text(env_dir / "setup.sh", "\n".join(lines) + "\n", executable=True)
