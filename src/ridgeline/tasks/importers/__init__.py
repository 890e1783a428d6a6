"""Importers: turn other benchmarks' tasks into Ridgeline (Harbor-layout) task directories.

``ridgeline import KIND SRC --out DIR`` calls :func:`import_tasks`, which looks ``KIND`` up in a
registry filled by :func:`register_importer`. An importer walks ``SRC`` and hands each source task to
a :class:`TaskSink`, which builds it in a staging folder, checks that :func:`~ridgeline.tasks.load_task`
accepts it, and records it as converted, or as skipped with the reason. One bad source task never
stops the others.

Guarantees of every import:

* **idempotent** — the same source gives the same bytes (no timestamps, no host paths, sorted walks);
* **no clobbering** — a non-empty ``--out`` is refused unless ``force``; the new tree is built next
  to it and swapped in at the end, so a failed import leaves the old one untouched;
* **a report** — :class:`ImportReport` (also written to ``DIR/import.json``) lists what converted,
  on which backend, with notes, and what did not and why.

Built-in kinds: ``harbor`` (:mod:`.harbor`), ``terminal-bench`` (:mod:`.terminal_bench`) and
``humaneval`` (:mod:`.humaneval`).
"""

from __future__ import annotations

import importlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from ridgeline.errors import TaskError, UserError

Backend = Literal["local", "container"]


class SkipTask(Exception):
    """Raised by an importer for one source task that cannot be converted; the message is the reason."""


@dataclass(frozen=True)
class Converted:
    """A converted task: its directory name, where it came from, its backend and any notes."""

    name: str
    source: str
    backend: Backend
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Skipped:
    """A source task that was not converted, and why."""

    source: str
    reason: str


@dataclass
class ImportReport:
    """What an import did."""

    kind: str
    src: str
    out: str
    converted: list[Converted] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "src": self.src,
            "n_converted": len(self.converted),
            "n_skipped": len(self.skipped),
            "converted": [asdict(c) for c in self.converted],
            "skipped": [asdict(s) for s in self.skipped],
        }


#: What a task builder returns: its backend and notes for the report.
BuildResult = tuple[Backend, list[str]]

_NAME_BAD = re.compile(r"[^a-z0-9._-]+")


def task_dir_name(text: str) -> str:
    """A task directory name from any label: lowercase letters, digits, '.', '_' and '-'."""
    name = _NAME_BAD.sub("-", text.lower()).strip("-._")[:64].rstrip("-._")
    return name or "task"


class TaskSink:
    """Receives source tasks from an importer and builds each one into ``root/<name>``."""

    def __init__(self, root: Path, report: ImportReport) -> None:
        self.root = root
        self.report = report
        self._names: set[str] = set()

    def skip(self, source: str, reason: str) -> None:
        """Record a source task that could not even be read."""
        self.report.skipped.append(Skipped(source, reason))

    def convert(self, source: str, label: str, build: Callable[[Path], BuildResult]) -> None:
        """Build one task into a fresh folder named after ``label``; record the outcome.

        ``build`` writes the task into the folder it is given and returns its backend and notes; it
        raises :class:`SkipTask` when the source cannot be converted. The result must load with
        :func:`~ridgeline.tasks.load_task`, or it is removed and reported as skipped.
        """
        from ridgeline.tasks.loader import load_task

        name = task_dir_name(label)
        if name in self._names:
            self.skip(source, f"another source task was already converted to the name {name!r}")
            return
        target = self.root / name
        target.mkdir()
        try:
            backend, notes = build(target)
            load_task(target)
        except SkipTask as exc:
            shutil.rmtree(target)
            self.skip(source, str(exc))
            return
        except TaskError as exc:
            shutil.rmtree(target)
            where = os.path.relpath(exc.path, target)
            self.skip(source, f"the converted task does not load: {where}: {exc.detail}")
            return
        except (OSError, UnicodeDecodeError) as exc:
            shutil.rmtree(target)
            self.skip(source, f"could not be read: {exc}")
            return
        self._names.add(name)
        self.report.converted.append(Converted(name, source, backend, tuple(notes)))


#: An importer: reads ``src`` and hands every source task to the sink. Raises UserError when ``src``
#: is not a source of this kind at all.
Importer = Callable[[Path, TaskSink], None]


@dataclass(frozen=True)
class ImporterInfo:
    kind: str
    description: str
    fn: Importer


_REGISTRY: dict[str, ImporterInfo] = {}
_BUILTIN = {"harbor": "harbor", "terminal-bench": "terminal_bench", "humaneval": "humaneval"}


def register_importer(kind: str, description: str) -> Callable[[Importer], Importer]:
    """Register an importer for ``ridgeline import KIND``."""

    def deco(fn: Importer) -> Importer:
        _REGISTRY[kind] = ImporterInfo(kind, description, fn)
        return fn

    return deco


def list_importers() -> list[ImporterInfo]:
    for module in _BUILTIN.values():
        importlib.import_module(f"{__name__}.{module}")
    return [_REGISTRY[k] for k in sorted(_REGISTRY)]


def get_importer(kind: str) -> ImporterInfo:
    """The importer for ``kind``.

    Raises:
        UserError: no importer of that kind.
    """
    if kind in _BUILTIN:
        importlib.import_module(f"{__name__}.{_BUILTIN[kind]}")
    if kind not in _REGISTRY:
        known = ", ".join(i.kind for i in list_importers())
        raise UserError(f"unknown import kind {kind!r}; expected one of: {known}")
    return _REGISTRY[kind]


def _is_empty_dir(path: Path) -> bool:
    return path.is_dir() and not any(path.iterdir())


def import_tasks(kind: str, src: Path, out: Path, *, force: bool = False) -> ImportReport:
    """Convert the source tasks of ``kind`` in ``src`` into task directories in ``out``.

    ``out`` ends up holding one folder per converted task and ``import.json`` (the report). When
    nothing converts, ``out`` is left as it was.

    Raises:
        UserError: unknown kind; ``src`` missing or not of this kind; ``out`` not empty without
            ``force``, or not a directory.
    """
    info = get_importer(kind)
    if not src.exists():
        raise UserError(f"{src}: does not exist (expected a {kind} source to import)")
    if out.exists() and not out.is_dir():
        raise UserError(f"{out}: is a file; --out must be a new or empty directory")
    if out.exists() and not _is_empty_dir(out) and not force:
        raise UserError(f"{out}: is not empty; choose a new --out or pass --force to replace its contents")
    if out.exists() and force and src.resolve().is_relative_to(out.resolve()):
        raise UserError(f"{out}: holds the source {src}; --force would delete it")
    out.parent.mkdir(parents=True, exist_ok=True)
    report = ImportReport(kind=kind, src=src.name, out=str(out))
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.import-", dir=out.parent))
    staging.chmod(0o755)
    try:
        info.fn(src, TaskSink(staging, report))
        if not report.converted:
            return report
        (staging / "import.json").write_text(json.dumps(report.to_json(), indent=2) + "\n", encoding="utf-8")
        if out.exists():
            shutil.rmtree(out)
        staging.replace(out)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    return report


__all__ = [
    "BuildResult",
    "Converted",
    "ImportReport",
    "ImporterInfo",
    "SkipTask",
    "Skipped",
    "TaskSink",
    "get_importer",
    "import_tasks",
    "list_importers",
    "register_importer",
    "task_dir_name",
]
