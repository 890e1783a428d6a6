"""``ridgeline import harbor``: Harbor task directories.

A Harbor task (https://harborframework.com/docs/tasks) is already in Ridgeline's layout: ``task.toml``,
``instruction.md``, ``environment/Dockerfile`` (build context ``environment/``), ``tests/test.sh``
writing ``/logs/verifier/reward.txt``, and ``solution/solve.sh``. What changes is the environment:

* a Dockerfile that is a plain base image plus ``WORKDIR`` / ``COPY`` / ``ENV`` (and ``RUN mkdir``)
  runs on the local backend: ``COPY`` sources go to ``environment/files`` (placed relative to the
  ``WORKDIR``), the ``WORKDIR`` becomes ``[environment] workdir``, ``RUN mkdir`` becomes
  ``environment/setup.sh``, and ``ENV`` values are recorded as ``[ridgeline] env``;
* any other keeps its build context as ``environment/`` for the container backend, with
  ``[ridgeline] dockerfile = "environment/Dockerfile"`` and the reasons in
  ``[ridgeline] container_reasons``; so does a task whose ``task.toml`` names a prebuilt
  ``docker_image`` or whose environment is a ``docker-compose.yaml``.

Harbor's deprecated ``memory`` / ``storage`` strings ("4G") become ``memory_mb`` / ``storage_mb``.
A task without ``solution/solve.sh`` is skipped: every Ridgeline task has a reference solution.
"""

from __future__ import annotations

import functools
import re
import tomllib
from pathlib import Path
from typing import Any

from ridgeline.errors import UserError
from ridgeline.tasks.importers import Backend, BuildResult, SkipTask, TaskSink, register_importer
from ridgeline.tasks.importers._common import (
    check_local,
    copy_tree,
    fetch_note,
    find_task_dirs,
    write_local_environment,
    write_text,
)
from ridgeline.tasks.importers._dockerfile import plan_dockerfile
from ridgeline.tasks.importers._toml import dumps

DOCKERFILE = "environment/Dockerfile"
_COMPOSE = ("docker-compose.yaml", "docker-compose.yml", "compose.yaml", "compose.yml")
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)I?B?\s*$", re.IGNORECASE)
_FACTOR_MB = {"K": 1 / 1024, "M": 1, "": 1, "G": 1024, "T": 1024 * 1024}


def size_mb(value: Any, key: str) -> int:
    """Harbor's ``"4G"`` / ``"512M"`` (a bare number means MiB) in MiB.

    Raises:
        SkipTask: the value is not a size.
    """
    text = str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value
    m = _SIZE.match(text) if isinstance(text, str) else None
    if m is None:
        raise SkipTask(f'task.toml: [environment] {key} = {value!r} is not a size such as "4G"')
    return max(1, round(float(m.group(1)) * _FACTOR_MB[m.group(2).upper()]))


def _table(data: dict[str, Any], key: str) -> dict[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise SkipTask(f"task.toml: [{key}] must be a table")
    return dict(value)


def _convert(src: Path, out: Path) -> BuildResult:
    try:
        data = tomllib.loads((src / "task.toml").read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SkipTask(f"task.toml is not valid TOML: {exc}") from None
    for rel in ("instruction.md", "tests/test.sh"):
        if not (src / rel).is_file():
            raise SkipTask(f"{rel} is missing")
    if not (src / "solution" / "solve.sh").is_file():
        raise SkipTask("solution/solve.sh is missing (every Ridgeline task needs a reference solution)")

    env = _table(data, "environment")
    for key in ("memory", "storage"):
        if key in env:
            value = env.pop(key)
            env.setdefault(f"{key}_mb", size_mb(value, key))
    metadata = _table(data, "metadata")
    metadata.setdefault("source", "harbor")
    metadata.setdefault("source_task", src.name)
    ridgeline = _table(data, "ridgeline")

    notes: list[str] = []
    context = src / "environment"
    compose = [n for n in _COMPOSE if (context / n).is_file()]
    reasons: list[str] = []
    if compose:
        reasons.append(f"environment/{compose[0]} (several services) needs a container engine")
    if env.get("docker_image"):
        reasons.append(f"task.toml names a prebuilt image (docker_image = {env['docker_image']!r})")
    dockerfile = src / DOCKERFILE
    plan = None
    workdir = str(env.get("workdir", "/app"))
    if dockerfile.is_file():
        plan = plan_dockerfile(dockerfile.read_text(encoding="utf-8", errors="replace"))
        workdir = plan.workdir or workdir
        check_local(plan, workdir)
        reasons.extend(plan.reasons)
    elif not env.get("docker_image"):
        raise SkipTask(f"{DOCKERFILE} is missing and task.toml names no docker_image")

    if plan is not None and not reasons:
        env["workdir"] = workdir
        if plan.workdir is None:
            notes.append(f"the Dockerfile sets no WORKDIR; the agent starts in {workdir}")
        write_local_environment(plan, context, out / "environment", workdir, exclude=["Dockerfile"])
        if plan.env:
            ridgeline["env"] = dict(sorted(plan.env.items()))
            notes.append(f"ENV {', '.join(sorted(plan.env))} recorded under [ridgeline] env")
        backend: Backend = "local"
    else:
        if plan is not None and plan.workdir:
            env["workdir"] = plan.workdir
        if context.is_dir():
            copy_tree(context, out / "environment")
        if dockerfile.is_file():
            ridgeline["dockerfile"] = DOCKERFILE
        ridgeline["container_reasons"] = reasons
        notes.extend(reasons)
        backend = "container"

    spec = {**data, "metadata": metadata, "environment": env, "ridgeline": ridgeline}
    write_text(out / "task.toml", dumps(spec))
    write_text(out / "instruction.md", (src / "instruction.md").read_text(encoding="utf-8", errors="replace"))
    copy_tree(src / "tests", out / "tests")
    copy_tree(src / "solution", out / "solution")
    notes.extend(fetch_note(src / "tests" / "test.sh", "tests/test.sh"))
    return backend, notes


@register_importer("harbor", "Harbor task directories (task.toml, instruction.md, environment/, tests/)")
def import_harbor(src: Path, sink: TaskSink) -> None:
    """Convert every Harbor task directory in ``src`` (or ``src`` itself)."""
    if not src.is_dir():
        raise UserError(f"{src}: is not a directory (expected Harbor task directories)")
    dirs = find_task_dirs(src, "task.toml")
    if not dirs:
        raise UserError(f"{src}: holds no Harbor task (no task.toml found below it)")
    for d in dirs:
        label = d.relative_to(src).as_posix() if d != src else d.name
        sink.convert(label, d.name, functools.partial(_convert, d))
