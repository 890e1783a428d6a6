"""The reset check: restoring a snapshot of a prepared task gives back the identical workdir.

The tree of the workdir is taken inside the sandbox (``find`` for types, modes and symlink targets,
``sha256sum`` for contents; modification times are left out), so the check sees what an agent would
see, whatever the backend. The mutation writes, appends to, deletes and re-modes files, makes a folder
and a symlink: everything an episode does to a workspace.
"""

from __future__ import annotations

import hashlib
from typing import Any

from ridgeline.errors import RidgelineError
from ridgeline.sandbox.base import Sandbox
from ridgeline.sandbox.prepare import open_task_sandbox
from ridgeline.tasks.loader import Task

_TREE_SCRIPT = (
    "cd \"$0\" && find . -mindepth 1 ! -name . -printf '%y %m %P -> %l\\n' | LC_ALL=C sort && "
    "echo '--' && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum"
)

_MUTATE_SCRIPT = (
    'cd "$0" && echo mutated > .rl-reset-new && mkdir -p .rl-reset-dir && ln -sf /etc/hostname .rl-reset-link'
    " && f=$(find . -type f ! -name '.rl-reset-*' | LC_ALL=C sort | head -n 1)"
    ' && if [ -n "$f" ]; then echo x >> "$f"; chmod 600 "$f"; fi'
    " && g=$(find . -type f ! -name '.rl-reset-*' | LC_ALL=C sort | sed -n 2p)"
    ' && if [ -n "$g" ]; then rm -f "$g"; fi'
)


def workdir_tree(sandbox: Sandbox, workdir: str) -> dict[str, str]:
    """The workdir's tree inside ``sandbox``: path -> "type mode [target] [sha256]"."""
    r = sandbox.exec(["/bin/sh", "-c", _TREE_SCRIPT, workdir], timeout=120)
    if not r.ok:
        raise RidgelineError(f"could not list the workdir {workdir}: {r.stderr.strip()[-300:]}")
    listing, _, sums = r.stdout.partition("--\n")
    tree: dict[str, str] = {}
    for line in listing.splitlines():
        kind, mode, rest = line.split(" ", 2)
        path, _, target = rest.partition(" -> ")
        tree[path] = f"{kind} {mode}" + (f" -> {target}" if target else "")
    for line in sums.splitlines():
        digest, _, path = line.partition("  ")
        path = path.removeprefix("./")
        tree[path] = tree.get(path, "f") + f" {digest}"
    return tree


def tree_hash(tree: dict[str, str]) -> str:
    """``sha256:`` + 16 hex digits over a tree from :func:`workdir_tree`."""
    blob = "\n".join(f"{k}\0{v}" for k, v in sorted(tree.items()))
    return "sha256:" + hashlib.sha256(blob.encode()).hexdigest()[:16]


def _diff(a: dict[str, str], b: dict[str, str], limit: int = 3) -> str:
    changed = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    shown = ", ".join(changed[:limit]) + (f" and {len(changed) - limit} more" if len(changed) > limit else "")
    return shown or "(nothing)"


def check_reset(task: Task) -> dict[str, Any]:
    """Prepare the task, hash, snapshot, hash, mutate, restore, hash; and hash a second fresh sandbox.

    Returns ``hash`` (the prepared tree), ``stable`` (nothing changed between the first two hashes),
    ``mutated`` (the mutation took), ``restored`` (the restored tree equals the snapshot's) and
    ``deterministic`` (a second prepared sandbox has the same tree), with the differing paths.

    Raises:
        TaskSetupError: setup.sh failed.
        SandboxError: the sandbox failed.
        RidgelineError: the workdir could not be listed.
    """

    workdir = task.spec.environment.workdir
    out: dict[str, Any] = {}
    with open_task_sandbox(task) as sb:
        before = workdir_tree(sb, workdir)
        snap = sb.snapshot()
        at_snapshot = workdir_tree(sb, workdir)
        sb.exec(["/bin/sh", "-c", _MUTATE_SCRIPT, workdir], timeout=60)
        mutated = workdir_tree(sb, workdir)
        sb.restore(snap)
        after = workdir_tree(sb, workdir)
    with open_task_sandbox(task) as fresh:
        second = workdir_tree(fresh, workdir)
    out["hash"] = tree_hash(before)
    out["stable"] = before == at_snapshot
    out["mutated"] = mutated != at_snapshot
    out["restored"] = after == at_snapshot
    out["deterministic"] = second == before
    if not out["stable"]:
        out["unstable_paths"] = _diff(before, at_snapshot)
    if not out["restored"]:
        out["restore_diff"] = _diff(at_snapshot, after)
    if not out["deterministic"]:
        out["fresh_diff"] = _diff(before, second)
    return out


__all__ = ["check_reset", "tree_hash", "workdir_tree"]
