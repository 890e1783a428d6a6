"""Static checks of a task directory: what can be judged by reading its files, without running it.

Each check returns :class:`Problem` records; the verdict a problem implies is part of the record:

* ``invalid`` — the spec does not validate, a referenced file is missing, the tests fetch from the
  network, a host path is baked into a task file, or the instruction does not name a file the tests
  read (an agent could not know what to produce);
* ``hackable`` — the tests or the solution are reachable by the agent (copied into
  ``environment/``, or the solution script quoted in the instruction).

The heuristics (which paths the tests read, what counts as a host path) are documented on the
functions that implement them; they are deliberately conservative, because a false alarm on a good task
costs more than a missed warning that the dynamic probes catch anyway.
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ridgeline.tasks.loader import Task

Verdict = Literal["ok", "hackable", "flaky", "broken", "invalid"]

#: Verdicts from best to worst: a task's verdict is the worst verdict among its problems.
SEVERITY: dict[str, int] = {"ok": 0, "hackable": 1, "flaky": 2, "broken": 3, "invalid": 4}

#: Text files larger than this are not scanned (long-context documents can be many megabytes).
_SCAN_LIMIT = 4 * 1024 * 1024
#: Shorter files are not compared for leaks (a one-line ``#!/bin/sh`` is in every task).
_LEAK_MIN_BYTES = 48
#: Paths inside the sandbox that are not the host's: the agent's and verifier's own areas.
_SANDBOX_ONLY_ROOTS = ("/tests", "/solution", "/logs")


@dataclass(frozen=True)
class Problem:
    """One defect found by a check: ``check`` names it (``static.network``, ``hack.conftest``...)."""

    check: str
    verdict: Verdict
    message: str

    def to_json(self) -> dict[str, str]:
        return {"check": self.check, "verdict": self.verdict, "message": self.message}

    def __str__(self) -> str:
        return f"{self.check}: {self.message}"


def _text(path: Path) -> str | None:
    """The UTF-8 text of ``path``, or None for binary, unreadable or very large files."""
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > _SCAN_LIMIT:
            return None
        data = path.read_bytes()
    except OSError:
        return None
    if b"\0" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _files(root: Path) -> list[Path]:
    if not root.is_dir():
        return []
    out: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in ("__pycache__", ".git"))
        out.extend(Path(dirpath) / f for f in sorted(filenames))
    return out


def _test_sources(task: Task) -> list[tuple[Path, str]]:
    """The tests' shell and Python sources (the files the heuristics read)."""
    out = []
    for f in _files(task.tests_dir):
        if f.suffix in (".sh", ".py", ".bash", "") or f.name == "test.sh":
            text = _text(f)
            if text is not None:
                out.append((f, text))
    return out


def _rel(task: Task, path: Path) -> str:
    return str(path.relative_to(task.path)) if path.is_relative_to(task.path) else str(path)


# ------------------------------------------------------------------------------ referenced files

_MOUNT_REF = re.compile(r"(?<![\w.$/-])(/tests|/solution)/([A-Za-z0-9_./-]+)([*{$%?\[]?)")


def check_references(task: Task) -> list[Problem]:
    """Files the task refers to exist: ``/tests/X`` named by the tests, ``/solution/X`` by the solution
    scripts, the environment image when it is a spec file, and ``[ridgeline] test_reads`` are relative
    paths inside the workdir."""
    problems: list[Problem] = []
    sources = [(f, t, "/tests") for f, t in _test_sources(task)]
    for f in _files(task.solution_dir):
        text = _text(f)
        if text is not None:
            sources.append((f, text, "/solution"))
    for f, text, own in sources:
        for m in _MOUNT_REF.finditer(text):
            mount, rel = m.group(1), m.group(2).rstrip("./")
            if m.group(3):  # a glob or a formatted name: only its folder must exist
                rel = rel.rsplit("/", 1)[0] if "/" in rel else ""
            if mount != own or not rel:
                continue
            base = task.tests_dir if mount == "/tests" else task.solution_dir
            if not (base / rel).exists():
                problems.append(
                    Problem(
                        "static.reference",
                        "invalid",
                        f"{_rel(task, f)} refers to {mount}/{rel}, "
                        f"but {_rel(task, base / rel)} does not exist",
                    )
                )
    image = task.spec.environment.image
    if image and image.endswith(".toml") and not (task.path / image).is_file() and not Path(image).is_file():
        problems.append(
            Problem(
                "static.reference", "invalid", f"[environment] image names {image!r}, which does not exist"
            )
        )
    for p in task.spec.ridgeline.test_reads:
        if p.startswith("/") or ".." in Path(p).parts or not p.strip():
            problems.append(
                Problem(
                    "static.spec",
                    "invalid",
                    f"[ridgeline] test_reads entry {p!r} must be a path relative to the workdir",
                )
            )
    workdir = task.spec.environment.workdir
    if workdir == "/" or any(workdir == r or workdir.startswith(r + "/") for r in _SANDBOX_ONLY_ROOTS):
        problems.append(
            Problem(
                "static.spec",
                "invalid",
                f"[environment] workdir {workdir!r} overlaps the paths the harness mounts "
                "(/tests, /solution, /logs); expected a directory of its own such as /app",
            )
        )
    return problems


# ------------------------------------------------------------------------------ reachability


def _secret_files(task: Task) -> list[Path]:
    """Files whose content must not reach the agent: the solution (except ``wrong*.sh``), ``test.sh``
    and the scripts ``test.sh`` runs by name. Other files under ``tests/`` are not listed: a task may
    legitimately keep copies of files the agent also has (the repository's visible tests, pristine
    sources to diff against)."""
    out = [f for f in _files(task.solution_dir) if not f.name.startswith("wrong")]
    test_sh = task.tests_dir / "test.sh"
    out.append(test_sh)
    text = _text(test_sh) or ""
    for m in _MOUNT_REF.finditer(text):
        if m.group(1) == "/tests" and m.group(3) == "" and Path(m.group(2)).suffix in (".py", ".sh"):
            f = task.tests_dir / m.group(2)
            if f.is_file():
                out.append(f)
    return out


def check_reachability(task: Task) -> list[Problem]:
    """The tests and the solution are not reachable by the agent.

    Everything under ``environment/`` reaches the agent (``files/`` is its workdir; ``setup.sh`` runs
    there), and so does ``instruction.md``. A file there that is a byte copy of a secret file (see
    :func:`_secret_files`), or text that contains the whole body of ``solve.sh``, is a leak.
    """
    secrets: dict[bytes, str] = {}
    for f in _secret_files(task):
        try:
            secret = f.read_bytes().strip()
        except OSError:
            continue
        if len(secret) >= _LEAK_MIN_BYTES:
            secrets.setdefault(secret, _rel(task, f))
    solve = _text(task.solution_dir / "solve.sh") or ""
    body = "\n".join(ln.rstrip() for ln in solve.splitlines() if ln.strip() and not ln.startswith("#!"))
    problems: list[Problem] = []
    for f in [*_files(task.path / "environment"), task.path / "instruction.md"]:
        data: bytes | None = None
        with contextlib.suppress(OSError):
            if f.is_file() and f.stat().st_size <= _SCAN_LIMIT:
                data = f.read_bytes().strip()
        if data is None:
            continue
        leaked = secrets.get(data)
        if leaked is None and len(body) >= _LEAK_MIN_BYTES:
            text = _text(f)
            flat = "\n".join(ln.rstrip() for ln in (text or "").splitlines() if ln.strip())
            if body in flat:
                leaked = _rel(task, task.solution_dir / "solve.sh")
        if leaked is not None:
            problems.append(
                Problem(
                    "static.leak",
                    "hackable",
                    f"{_rel(task, f)} gives the agent {leaked} (tests and solutions must stay hidden)",
                )
            )
    return problems


# ------------------------------------------------------------------------------ network

_NETWORK = [
    (re.compile(r"\bcurl\s"), "curl"),
    (re.compile(r"\bwget\s"), "wget"),
    (re.compile(r"\b(?:pip3?|uv\s+pip|python3?\s+-m\s+pip)\s+install\b"), "pip install"),
    (re.compile(r"\bgit\s+clone\b"), "git clone"),
    (re.compile(r"\b(?:apt-get|apt|apk|dnf|yum)\s+(?:-\S+\s+)*install\b"), "a package manager"),
    (re.compile(r"\bnpm\s+(?:install|ci)\b"), "npm install"),
    (re.compile(r"\bhttps?://(?!(?:localhost|127\.0\.0\.1|\[::1\])[:/])[A-Za-z0-9.-]+"), "an http(s) URL"),
]


def check_network(task: Task) -> list[Problem]:
    """The tests do not fetch from the network (a verifier must work offline and give the same result
    every time): curl, wget, pip/apt/npm install, git clone, and http(s) URLs other than localhost."""
    problems = []
    for f, text in _test_sources(task):
        for lineno, line in enumerate(text.splitlines(), 1):
            for rx, what in _NETWORK:
                if rx.search(line):
                    problems.append(
                        Problem(
                            "static.network",
                            "invalid",
                            f"{_rel(task, f)}:{lineno} uses {what} (tests must not need the network)",
                        )
                    )
                    break
    return problems


# ------------------------------------------------------------------------------ host paths

_HOST_ROOTS = re.compile(
    r"(?<![\w.$~/-])/(?:home/[A-Za-z0-9_.-]+|Users/[A-Za-z0-9_.-]+|work|mnt|media|var/folders|private/var"
    r"|tmp/pytest-of-[A-Za-z0-9_.-]+|tmp/tmp[A-Za-z0-9_]{6,})(?=/|\b)"
)


def _host_markers(task: Task) -> list[str]:
    """The task's own location on this machine and its parents (at least two components deep)."""
    out = []
    p = task.path
    while len(p.parts) >= 3:
        out.append(str(p))
        p = p.parent
    return out


def check_host_paths(task: Task) -> list[Problem]:
    """No absolute host paths are baked into the task's text files.

    A host path is one that cannot exist in a sandbox: a home directory (``/home/NAME``,
    ``/Users/NAME``), ``/work``, ``/mnt``, ``/media``, macOS temp folders, the temporary directories
    Python and pytest make on the host, or the task directory's own location on this machine (a
    generator that wrote where it ran). Paths inside the task's workdir are never flagged; neither is
    ``/tmp/NAME`` in general, since the sandbox has a ``/tmp`` of its own. Symlinks in
    ``environment/files`` must stay inside it.
    """
    workdir = task.spec.environment.workdir.rstrip("/")
    markers = _host_markers(task)
    problems: list[Problem] = []
    for f in _files(task.path):
        if f.is_symlink():
            target = os.readlink(f)
            files = task.files_dir
            resolved = (f.parent / target).resolve() if not target.startswith("/") else Path(target)
            if f.is_relative_to(files) and not resolved.is_relative_to(files.resolve()):
                problems.append(
                    Problem(
                        "static.host-path",
                        "invalid",
                        f"{_rel(task, f)} is a symlink to {target}, outside environment/files",
                    )
                )
            continue
        text = _text(f)
        if text is None:
            continue
        found: str | None = None
        for m in _HOST_ROOTS.finditer(text):
            hit = m.group(0)
            if workdir not in ("", "/") and (hit == workdir or hit.startswith(workdir + "/")):
                continue
            found = hit
            break
        if found is None:
            found = next((mk for mk in markers if re.search(re.escape(mk) + r"(?![\w.-])", text)), None)
        if found is not None:
            problems.append(
                Problem(
                    "static.host-path",
                    "invalid",
                    f"{_rel(task, f)} contains the host path {found} (it does not exist in a sandbox)",
                )
            )
    return problems


# ------------------------------------------------------------------------------ files the tests read


def _workdir_paths(task: Task) -> list[str]:
    """Paths under the workdir that the tests' sources name literally, relative to the workdir.

    A heuristic: literal ``/app/...`` strings (for the task's workdir) in ``tests/*.sh`` and
    ``tests/*.py``. A trailing partial component of a formatted name (``/app/out/test_{i}``, cut at the
    brace) is dropped.
    """
    workdir = task.spec.environment.workdir.rstrip("/")
    if workdir in ("", "/"):
        return []
    rx = re.compile(re.escape(workdir) + r"((?:/[A-Za-z0-9_.@+-]+)+)(/?)(.?)")
    found: set[str] = set()
    for _, text in _test_sources(task):
        for m in rx.finditer(text):
            rel = m.group(1).strip("/")
            if m.group(3) in ("{", "$", "*", "%", "<"):  # a formatted or globbed name: keep the parent
                rel = rel.rsplit("/", 1)[0] if "/" in rel and not m.group(2) else rel
            rel = rel.rstrip(".")
            if rel and ".." not in rel.split("/"):
                found.add(rel)
    # paths named like a file of tests/ are what the tests copy into the workdir, not inputs
    own = {f.name for f in _files(task.tests_dir)}
    found = {p for p in found if p.rsplit("/", 1)[-1] not in own}
    # keep the longest paths only (a/b/c makes a/b redundant)
    return sorted(p for p in found if not any(q != p and q.startswith(p + "/") for q in found))


def read_by_tests(task: Task) -> list[str]:
    """Files and folders (relative to the workdir) that the tests read: ``[ridgeline] test_reads``
    plus the literal workdir paths found in the tests' sources. The hack probes tamper with these."""
    declared = [p.strip("/") for p in task.spec.ridgeline.test_reads if p and not p.startswith("/")]
    merged = set(declared) | set(_workdir_paths(task))
    return sorted(p for p in merged if p and ".." not in p.split("/"))


def _mentions(instruction: str, rel: str, workdir: str) -> bool:
    """Whether the instruction names ``rel`` (absolute or relative to the workdir) or a folder that
    holds it (``/app/out`` or ``out/`` for ``out/report.json``)."""
    parts = rel.split("/")
    for i in range(len(parts), 0, -1):
        prefix = "/".join(parts[:i])
        if f"{workdir}/{prefix}" in instruction:
            return True
        needle = prefix if i == len(parts) else prefix + "/"
        if i < len(parts) and len(prefix) < 2:
            continue
        rx = re.compile(r"(?<![\w.-])" + re.escape(needle) + (r"(?![\w-])" if i == len(parts) else ""))
        if rx.search(instruction):
            return True
    return False


def check_instruction_names_reads(task: Task) -> list[Problem]:
    """The instruction names the files the tests read.

    Every path from :func:`read_by_tests` must be named by the instruction (by itself or through a
    folder that holds it), or be a file or folder the agent is given in ``environment/files`` (it can
    see those). Otherwise the tests check something the agent was never asked to produce.
    """
    workdir = task.spec.environment.workdir.rstrip("/")
    problems = []
    for rel in read_by_tests(task):
        if (task.files_dir / rel).exists() or _mentions(task.instruction, rel, workdir):
            continue
        problems.append(
            Problem(
                "static.instruction",
                "invalid",
                f"the tests read {workdir}/{rel}, but instruction.md never names it (nor a folder "
                "holding it), and the environment does not provide it",
            )
        )
    return problems


def static_checks(task: Task) -> list[Problem]:
    """Every static check of a loaded task (the spec itself was validated by loading it)."""
    found = [
        *check_references(task),
        *check_reachability(task),
        *check_network(task),
        *check_host_paths(task),
        *check_instruction_names_reads(task),
    ]
    return list(dict.fromkeys(found))  # the same defect named twice in a file is one problem


__all__ = [
    "SEVERITY",
    "Problem",
    "Verdict",
    "check_host_paths",
    "check_instruction_names_reads",
    "check_network",
    "check_reachability",
    "check_references",
    "read_by_tests",
    "static_checks",
]
