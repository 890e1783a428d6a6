"""The generator API: a :class:`TaskFamily` turns ``(seed, index, level)`` into a :class:`TaskDraft`.

A draft is a task held in memory (every file as text or bytes); :func:`write_task` materialises it
as a Harbor-style task directory. Generation is a pure function of the family's version, the seed,
the index and the difficulty level: the random source is seeded from a string naming all four, JSON
is written with sorted keys, nothing reads the clock, and files get fixed modes (``0o755`` for
scripts, ``0o644`` for everything else), so the same inputs give the same bytes and the same
:func:`~ridgeline.tasks.hash_tree`.

Verifiers written by the families share one hardening recipe (see :data:`TEST_SH_PRELUDE`):

* ``test.sh`` writes reward ``0`` before anything else and only overwrites it on success, so a crash,
  a timeout or a reward file planted by the agent never counts as a pass;
* ``PATH`` is reset to the system directories (``/usr`` is read-only in the sandbox), so trojan
  ``python3`` or ``pytest`` executables left in the workspace are never run;
* graders run as ``python3 -I`` (isolated: no ``PYTHONPATH``, no user site, no current directory on
  ``sys.path``), so a ``sitecustomize.py`` or a module that shadows the standard library in ``/app``
  is never imported; pytest runs from ``/tests`` with ``PYTHONSAFEPATH=1``, ``--rootdir=/tests``,
  ``-c /dev/null``, ``--confcutdir=/tests`` and ``-p no:cacheprovider``, so a ``conftest.py``,
  ``pytest.ini`` or ``pytest.py`` planted in ``/app`` is ignored;
* expected values live only in ``/tests`` (which the agent never sees); files in ``/app`` are
  treated as the agent's output, never as ground truth.

Not covered here (the verifier runtime's job): killing the agent's processes before verification
and giving the verifier a fresh ``/logs/verifier``.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

LEVELS: dict[int, str] = {1: "easy", 2: "medium", 3: "hard"}

#: The first lines of every generated ``tests/test.sh``.
TEST_SH_PRELUDE = """#!/bin/sh
# Hidden verifier: copied to /tests only after the agent has finished.
# Reward 0 is written first and overwritten only on success; PATH is reset (the read-only environment
# image first, for python3 + pytest) so that executables planted in the workspace are never run;
# Python ignores the workspace (see the grader's docstring).
export PATH=/opt/ridgeline/image/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PYTHONDONTWRITEBYTECODE=1 PYTHONSAFEPATH=1 PYTHONNOUSERSITE=1
unset PYTHONSTARTUP PYTHONHOME PYTHONINSPECT PYTEST_ADDOPTS PYTEST_PLUGINS
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
cd /tests || exit 0
"""

#: ``test.sh`` for tasks graded by one stdlib script ``tests/grade.py`` (exit 0 = pass).
GRADE_TEST_SH = (
    TEST_SH_PRELUDE
    + """if python3 -I /tests/grade.py; then
  echo 1 > /logs/verifier/reward.txt
fi
"""
)

#: Helpers prepended to every generated ``grade.py``. Standard library only.
GRADER_HEADER = '''"""Hidden grader. Expected values are embedded here, never read from /app.

Runs as ``python3 -I`` so nothing in the workspace can shadow a module; exits 0 only when every
check passes and prints one line per failed check.
"""
import json
import os
import re
import sys

FAILED = []


def check(ok, message):
    if not ok:
        FAILED.append(message)
    return bool(ok)


def read_text(path, limit=50_000_000):
    try:
        with open(path, "rb") as f:
            return f.read(limit).decode("utf-8", "replace")
    except OSError as exc:
        FAILED.append(f"cannot read {path}: {exc.strerror}")
        return None


def read_answer():
    text = read_text("/logs/agent/answer.txt")
    return "" if text is None else text.strip()


_NUM = re.compile(r"[-+]?\\d[\\d,]*(?:\\.\\d+)?(?:[eE][-+]?\\d+)?|[-+]?\\.\\d+")


def parse_number(text):
    """The single number in ``text`` ($, %, commas and surrounding words allowed); else None."""
    found = _NUM.findall(text or "")
    if len(found) != 1:
        return None
    try:
        return float(found[0].replace(",", ""))
    except ValueError:
        return None


def close(got, want, tol):
    return got is not None and abs(got - want) <= tol


def finish():
    for message in FAILED:
        print("FAIL:", message)
    if FAILED:
        sys.exit(1)
    print("PASS")
    sys.exit(0)

'''


def dumps_json(data: Any, *, indent: int | None = 2) -> str:
    """Canonical JSON: sorted keys, fixed separators, trailing newline when indented."""
    text = json.dumps(data, indent=indent, sort_keys=True, ensure_ascii=True)
    return text + "\n" if indent is not None else text


def grader(body: str, **expected: Any) -> str:
    """A ``grade.py``: the shared header, ``NAME = <json>`` constants, then ``body``."""
    consts = "".join(
        f"{k} = json.loads({dumps_json(v, indent=None)!r})\n" for k, v in sorted(expected.items())
    )
    return GRADER_HEADER + consts + "\n" + body.strip("\n") + "\nfinish()\n"


# ---------------------------------------------------------------------------------------------- TOML


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise ValueError(f"cannot write {v!r} to TOML")
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=True)
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} to TOML")


def toml_dumps(data: Mapping[str, Any]) -> str:
    """Write the subset of TOML that task files use: top-level scalars, tables, arrays of tables."""
    lines: list[str] = []
    for k, v in data.items():
        if not isinstance(v, Mapping) and not _is_table_array(v):
            lines.append(f"{k} = {_toml_value(v)}")
    for k, v in data.items():
        if isinstance(v, Mapping):
            lines.append("")
            lines.append(f"[{k}]")
            arrays = []
            for kk, vv in v.items():
                if _is_table_array(vv):
                    arrays.append((kk, vv))
                elif isinstance(vv, Mapping):
                    raise TypeError("nested tables are not used in task.toml")
                else:
                    lines.append(f"{_key(kk)} = {_toml_value(vv)}")
            for kk, rows in arrays:
                for row in rows:
                    lines.append("")
                    lines.append(f"[[{k}.{kk}]]")
                    lines.extend(f"{_key(rk)} = {_toml_value(rv)}" for rk, rv in row.items())
    return "\n".join(lines).lstrip("\n") + "\n"


def _key(k: str) -> str:
    return k if k.replace("_", "").replace("-", "").isalnum() else json.dumps(k)


def _is_table_array(v: Any) -> bool:
    return isinstance(v, list | tuple) and bool(v) and all(isinstance(x, Mapping) for x in v)


# ---------------------------------------------------------------------------------------------- drafts


@dataclass(frozen=True)
class Checkpoint:
    """A process-reward subgoal written to ``[[ridgeline.checkpoints]]``."""

    name: str
    check: str
    weight: float = 1.0


@dataclass
class TaskDraft:
    """A generated task held in memory; :func:`write_task` writes it out.

    ``files`` maps paths relative to the task root (``environment/files/data.csv``,
    ``tests/grade.py``) to their contents. Scripts (``*.sh``) and paths in ``executables`` get mode
    ``0o755``; everything else ``0o644``.
    """

    name: str
    description: str
    instruction: str
    files: dict[str, str | bytes]
    kind: str = ""
    level: int = 1
    required_steps: int = 1
    keywords: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)
    answer: bool = False
    test_reads: tuple[str, ...] = ()
    checkpoints: tuple[Checkpoint, ...] = ()
    executables: frozenset[str] = frozenset()
    agent_timeout_sec: float = 600.0
    max_steps: int = 30
    verifier_timeout_sec: float = 120.0
    memory_mb: int = 1024
    storage_mb: int = 256

    def task_toml(self, family: TaskFamily, seed: int, index: int, suite: str) -> str:
        meta: dict[str, Any] = {
            "suite": suite,
            "difficulty": LEVELS[self.level],
            "level": self.level,
            "required_steps": self.required_steps,
            "domain": family.domain,
            "family": family.id,
            "kind": self.kind,
            "seed": seed,
            "index": index,
        }
        meta.update(self.metadata)
        ridgeline: dict[str, Any] = {"answer": self.answer, "test_reads": list(self.test_reads)}
        if self.checkpoints:
            ridgeline["checkpoints"] = [
                {"name": c.name, "check": c.check, "weight": float(c.weight)} for c in self.checkpoints
            ]
        data: dict[str, Any] = {
            "version": "1.0",
            "task": {
                "name": self.name,
                "description": self.description,
                "keywords": [family.domain, self.kind, *self.keywords],
            },
            "metadata": meta,
            "agent": {"timeout_sec": float(self.agent_timeout_sec), "max_steps": self.max_steps},
            "verifier": {"timeout_sec": float(self.verifier_timeout_sec)},
            "environment": {
                "cpus": 1,
                "memory_mb": self.memory_mb,
                "storage_mb": self.storage_mb,
                "allow_internet": False,
                "workdir": "/app",
            },
            "ridgeline": ridgeline,
        }
        return toml_dumps(data)


def write_task(
    draft: TaskDraft, dest: Path, family: TaskFamily, seed: int, index: int, suite: str | None = None
) -> Path:
    """Write ``draft`` into the new directory ``dest`` with fixed file modes; return ``dest``."""
    files: dict[str, str | bytes] = {
        "task.toml": draft.task_toml(family, seed, index, suite or family.id),
        "instruction.md": draft.instruction,
        **draft.files,
    }
    for required in ("tests/test.sh", "solution/solve.sh"):
        if required not in files:
            raise ValueError(f"{family.id} produced a task without {required}")
    dest.mkdir(parents=True, exist_ok=False)
    for rel in sorted(files):
        path = dest / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        content = files[rel]
        path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
        path.chmod(0o755 if rel.endswith(".sh") or rel in draft.executables else 0o644)
    return dest


# ---------------------------------------------------------------------------------------------- families

Generator = Callable[[random.Random, int], TaskDraft]

#: Every registered family class by name; filled by :func:`register_family`.
FAMILIES: dict[str, type[TaskFamily]] = {}


class TaskFamily(ABC):
    """A seeded, versioned generator of tasks in one domain.

    Subclasses set the class attributes and implement :meth:`kinds`, a mapping from a kind name
    (``"logs"``, ``"bugfix"``) to a generator ``(rng, level) -> TaskDraft``. Bump ``version`` whenever
    a change alters the bytes produced for an existing ``(seed, index, level)``.
    """

    name: ClassVar[str]
    version: ClassVar[int]
    domain: ClassVar[str]
    description: ClassVar[str]

    @property
    def id(self) -> str:
        return f"{self.name}-v{self.version}"

    @abstractmethod
    def kinds(self) -> Mapping[str, Generator]:
        """The task kinds this family makes, in a fixed order."""

    def plan(self, index: int) -> tuple[str, int]:
        """The ``(kind, level)`` of task ``index``: kinds rotate, levels shift every full rotation.

        The first ``len(kinds)`` indices cover every kind; the first ``3 * len(kinds)`` cover every
        ``(kind, level)`` pair.
        """
        names = list(self.kinds())
        k = len(names)
        return names[index % k], 1 + (index % k + index // k) % 3

    def generate(self, seed: int, index: int, level: int | None = None, kind: str | None = None) -> TaskDraft:
        """The task at ``index`` for ``seed``; ``level``/``kind`` override the plan."""
        planned_kind, planned_level = self.plan(index)
        kind = kind or planned_kind
        level = level or planned_level
        if level not in LEVELS:
            raise ValueError(f"level must be 1, 2 or 3 (got {level})")
        make = self.kinds()[kind]
        rng = random.Random(f"{self.id}:{seed}:{index}:{kind}:{level}")
        draft = make(rng, level)
        draft.kind, draft.level = kind, level
        draft.name = f"{self.id}-{kind}-s{seed}-{index:04d}"
        # Longer horizons get more room: steps and wall time grow with the level.
        draft.max_steps = max(draft.max_steps, 20 + 20 * level)
        draft.agent_timeout_sec = draft.agent_timeout_sec * (1 + level) / 2
        return draft


def register_family(cls: type[TaskFamily]) -> type[TaskFamily]:
    """Class decorator: make a family available as the suite ``<name>-v<version>``."""
    if cls.name in FAMILIES and FAMILIES[cls.name] is not cls:
        raise ValueError(f"task family {cls.name!r} is registered twice")
    FAMILIES[cls.name] = cls
    return cls


# ---------------------------------------------------------------------------------------------- helpers


def sha256_hex(data: str | bytes) -> str:
    return hashlib.sha256(data.encode("utf-8") if isinstance(data, str) else data).hexdigest()


def heredoc(path: str, text: str, marker: str = "RIDGELINE_EOF") -> str:
    """A shell snippet that writes ``text`` to ``path`` verbatim (quoted heredoc, no expansion)."""
    if marker in text:
        raise ValueError("heredoc marker occurs in the text")
    body = text if text.endswith("\n") else text + "\n"
    return f"cat > {path} <<'{marker}'\n{body}{marker}\n"


def pick(rng: random.Random, seq: Sequence[str], k: int) -> list[str]:
    """``k`` distinct items of ``seq`` in a seeded order."""
    return rng.sample(list(seq), k)


WORDS = [
    "amber",
    "basil",
    "cedar",
    "delta",
    "ember",
    "fjord",
    "garnet",
    "harbor",
    "indigo",
    "juniper",
    "kestrel",
    "lagoon",
    "maple",
    "nectar",
    "onyx",
    "pebble",
    "quartz",
    "raven",
    "sable",
    "tundra",
    "umber",
    "violet",
    "willow",
    "xenon",
    "yarrow",
    "zephyr",
    "alder",
    "birch",
    "cobalt",
    "dune",
    "falcon",
    "glacier",
    "heron",
    "iris",
    "jasper",
    "kelp",
    "lotus",
    "meadow",
    "nimbus",
    "orchid",
    "prairie",
    "quill",
    "reef",
    "sierra",
    "thistle",
    "upland",
    "vale",
    "wren",
]
