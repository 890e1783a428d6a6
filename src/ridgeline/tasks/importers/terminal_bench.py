"""``ridgeline import terminal-bench``: Terminal-Bench 1 task directories.

A Terminal-Bench 1 task is a folder with ``task.yaml`` (``instruction``, or ``descriptions`` whose
``base`` entry holds it; ``difficulty``, ``category``, ``tags``, ``author_name``/``author_email``,
``parser_name``, ``max_agent_timeout_sec``, ``max_test_timeout_sec``, ``run_tests_in_same_shell``),
``solution.sh``, ``run-tests.sh``, ``tests/``, and a ``Dockerfile`` (build context: the task folder)
with a ``docker-compose.yaml``. The conversion:

* ``instruction.md`` from the instruction; ``solution/solve.sh`` from ``solution.sh``;
* ``tests/`` copied, ``run-tests.sh`` placed beside it as ``tests/run-tests.sh`` (or, when there is
  none, one that runs pytest on ``tests/test_outputs.py``, Terminal-Bench's default), and a
  ``tests/test.sh`` that runs it as Terminal-Bench does (``TEST_DIR=/tests``, in the workdir) and
  writes reward 1 when it exits 0, else 0. Terminal-Bench itself grades with a parser over the test
  output; a run-tests.sh whose exit code does not reflect its tests needs a look. The script runs
  as written: one that calls ``python -m pytest`` in the workdir lets modules planted there shadow
  the test runner, which ``ridgeline check`` reports as ``hackable``;
* timeouts to ``[agent]`` / ``[verifier]`` ``timeout_sec``, the rest of ``task.yaml`` to
  ``[metadata]`` (``tags`` also to ``[task] keywords``);
* the Dockerfile as for Harbor tasks (see :mod:`.harbor`): plain images run locally with the copied
  files in ``environment/files``; the rest keep the Dockerfile and the build context (without the
  task's tests and solution) in ``environment/`` for the container backend. A compose file with more
  than one service needs a container engine.

Tasks whose only solution is ``solution.yaml`` (terminal keystrokes) are skipped.
"""

from __future__ import annotations

import functools
import importlib
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

_COMPOSE = ("docker-compose.yaml", "docker-compose.yml")
#: Files of a Terminal-Bench task that grade or solve it: never part of the agent's environment.
HIDDEN = ("task.yaml", "solution.sh", "solution.yaml", "run-tests.sh", "tests")
#: ... and those that only build it.
MACHINERY = (*HIDDEN, "Dockerfile", *_COMPOSE)

_DEFAULT_RUN_TESTS = """#!/bin/bash
# Written by the importer: the source task had no run-tests.sh; Terminal-Bench's default runs pytest.
python3 -m pytest "$TEST_DIR/test_outputs.py" -rA
"""

_TEST_SH = """#!/bin/sh
# Converted from Terminal-Bench: run the task's run-tests.sh as Terminal-Bench does (TEST_DIR=/tests,
# in the working directory); reward 1 when it exits 0, else 0. Reward 0 is written first.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
export TEST_DIR=/tests
cd {workdir} || exit 0
if bash /tests/run-tests.sh; then
  echo 1 > /logs/verifier/reward.txt
fi
"""


def _yaml() -> Any:
    try:
        return importlib.import_module("yaml")
    except ImportError:
        raise UserError(
            "the terminal-bench importer reads task.yaml with PyYAML, which is not installed: "
            "pip install pyyaml"
        ) from None


def _load_yaml(path: Path) -> Any:
    yaml = _yaml()
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise SkipTask(f"{path.name} is not valid YAML: {' '.join(str(exc).split())}") from None


def instruction_of(meta: dict[str, Any]) -> str:
    """The instruction of a ``task.yaml``: ``instruction``, or the ``base`` (else first) description."""
    text = meta.get("instruction")
    if isinstance(text, str) and text.strip():
        return text
    descriptions = meta.get("descriptions")
    if isinstance(descriptions, list):
        entries = [d for d in descriptions if isinstance(d, dict) and isinstance(d.get("description"), str)]
        base = [d for d in entries if d.get("key") == "base"] or entries
        if base and base[0]["description"].strip():
            return str(base[0]["description"])
    raise SkipTask("task.yaml has no instruction (neither instruction nor descriptions[].description)")


def _timeout(meta: dict[str, Any], key: str, notes: list[str]) -> float | None:
    value = meta.get(key)
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    notes.append(f"task.yaml {key} = {value!r} is not a positive number; the default is used")
    return None


def _compose_services(src: Path) -> int:
    for name in _COMPOSE:
        if (src / name).is_file():
            data = _load_yaml(src / name)
            services = data.get("services") if isinstance(data, dict) else None
            return len(services) if isinstance(services, dict) else 0
    return 0


def _convert(src: Path, out: Path) -> BuildResult:
    meta = _load_yaml(src / "task.yaml")
    if not isinstance(meta, dict):
        raise SkipTask("task.yaml is not a mapping of keys to values")
    instruction = instruction_of(meta)
    if not (src / "solution.sh").is_file():
        if (src / "solution.yaml").is_file():
            raise SkipTask("only solution.yaml (terminal keystrokes) is present; solution.sh is needed")
        raise SkipTask("solution.sh is missing")
    tests = src / "tests"
    has_tests = tests.is_dir()
    if not has_tests and not (src / "run-tests.sh").is_file():
        raise SkipTask("has neither tests/ nor run-tests.sh")
    for clash in ("test.sh", "run-tests.sh"):
        if has_tests and (tests / clash).exists():
            raise SkipTask(f"tests/{clash} would be overwritten by the converted verifier")

    notes: list[str] = []
    agent_timeout = _timeout(meta, "max_agent_timeout_sec", notes)
    test_timeout = _timeout(meta, "max_test_timeout_sec", notes)
    reasons: list[str] = []
    n_services = _compose_services(src)
    if n_services > 1:
        reasons.append(f"docker-compose defines {n_services} services; that needs a container engine")
    dockerfile = src / "Dockerfile"
    if not dockerfile.is_file():
        raise SkipTask("Dockerfile is missing")
    plan = plan_dockerfile(dockerfile.read_text(encoding="utf-8", errors="replace"))
    workdir = plan.workdir or "/app"
    check_local(plan, workdir)
    reasons.extend(plan.reasons)

    env_dir = out / "environment"
    ridgeline: dict[str, Any] = {}
    backend: Backend
    if not reasons:
        write_local_environment(plan, src, env_dir, workdir, exclude=MACHINERY)
        if plan.env:
            ridgeline["env"] = dict(sorted(plan.env.items()))
            notes.append(f"ENV {', '.join(sorted(plan.env))} recorded under [ridgeline] env")
        backend = "local"
    else:
        copy_tree(src, env_dir, skip=lambda p: p.parent == src and p.name in HIDDEN)
        ridgeline["dockerfile"] = "environment/Dockerfile"
        ridgeline["container_reasons"] = reasons
        notes.extend(reasons)
        backend = "container"

    if meta.get("run_tests_in_same_shell") is True:
        notes.append("run_tests_in_same_shell: the tests run in a fresh sandbox on the agent's final files")
    parser = meta.get("parser_name")
    if parser not in (None, "pytest"):
        notes.append(f"parser {parser!r} is not used: the reward is run-tests.sh's exit code")

    tags = meta.get("tags")
    keywords = [str(t) for t in tags] if isinstance(tags, list) else []
    metadata: dict[str, Any] = {"source": "terminal-bench", "source_task": src.name}
    for key in ("difficulty", "category", "author_name", "author_email", "parser_name"):
        if isinstance(meta.get(key), str):
            metadata[key] = meta[key]
    if keywords:
        metadata["tags"] = keywords
    if isinstance(meta.get("run_tests_in_same_shell"), bool):
        metadata["run_tests_in_same_shell"] = meta["run_tests_in_same_shell"]
    agent: dict[str, Any] = {"timeout_sec": agent_timeout} if agent_timeout else {}
    verifier: dict[str, Any] = {"timeout_sec": test_timeout} if test_timeout else {}
    first_line = next((ln.strip() for ln in instruction.splitlines() if ln.strip()), "")
    spec: dict[str, Any] = {
        "version": "1.0",
        "task": {"name": out.name, "description": first_line[:200], "keywords": keywords},
        "metadata": metadata,
        "agent": agent,
        "verifier": verifier,
        "environment": {"workdir": workdir, "allow_internet": False},
        "ridgeline": ridgeline,
    }
    write_text(out / "task.toml", dumps(spec))
    write_text(out / "instruction.md", instruction.rstrip("\n") + "\n")
    write_text(
        out / "solution" / "solve.sh", (src / "solution.sh").read_text(encoding="utf-8"), executable=True
    )
    if has_tests:
        copy_tree(tests, out / "tests")
    if (src / "run-tests.sh").is_file():
        text = (src / "run-tests.sh").read_text(encoding="utf-8")
        notes.extend(fetch_note(src / "run-tests.sh", "run-tests.sh"))
    else:
        text = _DEFAULT_RUN_TESTS
        notes.append("no run-tests.sh: the tests run with pytest on tests/test_outputs.py")
    write_text(out / "tests" / "run-tests.sh", text, executable=True)
    write_text(out / "tests" / "test.sh", _TEST_SH.format(workdir=workdir), executable=True)
    return backend, notes


@register_importer("terminal-bench", "Terminal-Bench 1 task directories (task.yaml, solution.sh, tests/)")
def import_terminal_bench(src: Path, sink: TaskSink) -> None:
    """Convert every Terminal-Bench task directory in ``src`` (or ``src`` itself)."""
    if not src.is_dir():
        raise UserError(f"{src}: is not a directory (expected Terminal-Bench task directories)")
    dirs = find_task_dirs(src, "task.yaml")
    if not dirs:
        raise UserError(f"{src}: holds no Terminal-Bench task (no task.yaml found below it)")
    _yaml()  # fail once, up front, when PyYAML is missing
    for d in dirs:
        label = d.relative_to(src).as_posix() if d != src else d.name
        sink.convert(label, d.name, functools.partial(_convert, d))
