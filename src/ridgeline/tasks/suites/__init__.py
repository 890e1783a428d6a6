"""Task suites: named, versioned (``name-vN``) seeded generators of task directories.

Each procedural family (``terminal``, ``code``, ``finance``, ``scene``, ``longctx``) is a suite of its
own; ``starter`` mixes all of them. The ``drills-*`` families are short-horizon tasks a tiny
policy can learn; ``quickstart`` mixes them (see :mod:`ridgeline.tasks.suites.drills`). A suite's
tasks are a pure function of ``(suite version, seed, n)``: building twice gives byte-identical
directories.

Example:
    >>> from ridgeline.tasks.suites import get_suite
    >>> get_suite("terminal").id
    'terminal-v1'
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ridgeline.errors import UserError
from ridgeline.tasks.suites import code, drills, finance, longctx, scene, terminal  # noqa: F401  (registration)
from ridgeline.tasks.suites.base import FAMILIES, LEVELS, TaskDraft, TaskFamily, write_task
from ridgeline.tasks.suites.drills import DRILL_FAMILIES, QUICKSTART_DOMAINS, quickstart_plan
from ridgeline.tasks.suites.starter import STARTER_DOMAINS, starter_plan

__all__ = [
    "LEVELS",
    "Suite",
    "TaskDraft",
    "TaskFamily",
    "build_suite",
    "get_suite",
    "list_suites",
]

#: ``(family, family index, draft)`` triples, one per task of a suite.
Planned = list[tuple[TaskFamily, int, TaskDraft]]


@dataclass(frozen=True)
class Suite:
    """A named, versioned collection of generated tasks."""

    name: str
    version: int
    description: str
    domains: tuple[str, ...]
    default_n: int
    families: tuple[TaskFamily, ...]
    plan: Callable[[int, int], Planned]

    @property
    def id(self) -> str:
        return f"{self.name}-v{self.version}"

    def drafts(self, n: int | None = None, seed: int = 0) -> Planned:
        """The suite's first ``n`` tasks (default :attr:`default_n`) for ``seed``, in memory."""
        return self.plan(self.default_n if n is None else n, seed)


def _family_suite(family: TaskFamily) -> Suite:
    def plan(n: int, seed: int) -> Planned:
        return [(family, i, family.generate(seed, i)) for i in range(n)]

    return Suite(
        name=family.name,
        version=family.version,
        description=family.description,
        domains=(family.domain,),
        default_n=3 * len(family.kinds()),
        families=(family,),
        plan=plan,
    )


def _suites() -> dict[str, Suite]:
    families = [cls() for _, cls in sorted(FAMILIES.items())]
    suites = {f.id: _family_suite(f) for f in families}
    by_name = {f.name: f for f in families}
    starter = Suite(
        name="starter",
        version=1,
        description="A mix of every domain at every difficulty level: the default evaluation set.",
        domains=STARTER_DOMAINS,
        default_n=60,
        families=tuple(by_name[d] for d in STARTER_DOMAINS if d in by_name),
        plan=lambda n, seed: starter_plan(by_name, n, seed),
    )
    suites[starter.id] = starter
    quick = Suite(
        name="quickstart",
        version=1,
        description="Short-horizon drills in every domain at every level: what `ridgeline quickstart` "
        "trains and evaluates a tiny policy on.",
        domains=QUICKSTART_DOMAINS,
        default_n=100,
        families=tuple(by_name[DRILL_FAMILIES[d]] for d in QUICKSTART_DOMAINS),
        plan=lambda n, seed: quickstart_plan(by_name, n, seed),
    )
    suites[quick.id] = quick
    return dict(sorted(suites.items()))


_SUITES = _suites()


def list_suites() -> list[Suite]:
    """Every built-in suite, sorted by id."""
    return list(_SUITES.values())


def get_suite(name: str) -> Suite:
    """The suite ``name`` (``"terminal-v1"``, or ``"terminal"`` for its newest version).

    Raises:
        UserError: no suite has that name; the message lists the known ones.
    """
    if name in _SUITES:
        return _SUITES[name]
    versions = [s for s in _SUITES.values() if s.name == name]
    if versions:
        return max(versions, key=lambda s: s.version)
    known = ", ".join(_SUITES)
    raise UserError(f"unknown suite {name!r}: expected one of {known} (or a name without -vN)")


def build_suite(name: str, n: int | None, seed: int, out_dir: str | Path) -> list[Path]:
    """Materialise the first ``n`` tasks of suite ``name`` for ``seed`` as directories in ``out_dir``.

    ``out_dir`` is created when missing and must be empty otherwise. Returns the task directories in
    suite order.

    Raises:
        UserError: unknown suite, ``n`` below 1, a negative seed, or ``out_dir`` not an empty directory.
    """
    suite = get_suite(name)
    if n is not None and n < 1:
        raise UserError(f"--n must be at least 1 (got {n}): the number of tasks to build")
    if seed < 0:
        raise UserError(f"--seed must be a non-negative integer (got {seed})")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise UserError(f"{out}: is not a directory; expected a new or empty directory for the tasks")
    if out.is_dir() and any(out.iterdir()):
        raise UserError(f"{out}: is not empty; expected a new or empty directory for the tasks")
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for family, index, draft in suite.drafts(n, seed):
        paths.append(write_task(draft, out / draft.name, family, seed, index, suite=suite.id))
    return paths
