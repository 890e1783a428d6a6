"""``starter-v1``: every domain at every difficulty level, interleaved.

Task ``i`` is task ``i // 5`` of family ``STARTER_DOMAINS[i % 5]`` for the same seed, so a starter
task is byte-identical to the family task it comes from except for ``[metadata] suite``. With the
default 60 tasks every family contributes 12, which covers each of its kinds at every level at least
once for families with up to four kinds, and every level for all of them.
"""

from __future__ import annotations

from collections.abc import Mapping

from ridgeline.tasks.suites.base import TaskDraft, TaskFamily

STARTER_DOMAINS: tuple[str, ...] = ("terminal", "code", "finance", "scene", "longctx")


def starter_plan(
    families: Mapping[str, TaskFamily], n: int, seed: int
) -> list[tuple[TaskFamily, int, TaskDraft]]:
    """The first ``n`` starter tasks for ``seed`` as ``(family, family index, draft)``."""
    out = []
    for i in range(n):
        family = families[STARTER_DOMAINS[i % len(STARTER_DOMAINS)]]
        index = i // len(STARTER_DOMAINS)
        out.append((family, index, family.generate(seed, index)))
    return out
