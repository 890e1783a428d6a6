"""``ridgeline import humaneval``: HumanEval-style JSONL, one task per line.

Each line is an object with ``task_id``, ``prompt`` (imports, signature and docstring),
``canonical_solution`` (the body), ``test`` (defining ``check(candidate)``) and ``entry_point``. A
``.gz`` file is read compressed. Each problem becomes a task:

* ``environment/files/solution.py`` holds the prompt: the agent completes the function in
  ``/app/solution.py``; the instruction says so and shows the prompt;
* ``solution/solve.sh`` writes prompt + canonical solution (kept beside it as ``solution.py``);
* ``tests/`` holds the hidden ``test`` code and a small runner; ``tests/test.sh`` copies the agent's
  file out of the workspace and runs ``check(entry_point)`` under a timeout.

As in HumanEval's own harness, the test code runs in the namespace of the candidate's module (some
tests call helpers that the prompt defines), so the candidate's code shares the interpreter with
``check``. The runner prints its verdict line only after ``check`` returns, and ``test.sh`` needs both
that line and exit code 0, so a candidate that exits early, raises ``SystemExit`` or never returns
fails. The verifier resets ``PATH`` and runs Python isolated (``-I``) from outside the workspace, so
files planted in ``/app`` (``sitecustomize.py``, a fake ``python3``) are not picked up.

A malformed line (bad JSON, missing or non-string fields, code that does not parse, no ``check``, no
function named ``entry_point``) is reported with its line number and does not stop the import.
"""

from __future__ import annotations

import ast
import functools
import gzip
import json
from pathlib import Path
from typing import Any

from ridgeline.errors import UserError
from ridgeline.tasks.importers import BuildResult, SkipTask, TaskSink, register_importer
from ridgeline.tasks.importers._common import write_text
from ridgeline.tasks.importers._toml import dumps

FIELDS = ("task_id", "prompt", "canonical_solution", "test", "entry_point")
SOLUTION_PATH = "/app/solution.py"
VERDICT = "humaneval: all checks passed"

_INSTRUCTION = """Complete the Python function `{entry}` in `{path}`.

The file holds the function's signature and docstring (shown below). Write its body so that the
function behaves as the docstring describes. Keep the function's name and signature; you may add
imports and helper functions to the same file. Hidden tests will import `{path}` and call `{entry}`.

```python
{prompt}
```
"""

_SOLVE = """#!/bin/sh
# Reference solution: the prompt followed by the canonical body.
cp "$(dirname "$0")/solution.py" {path}
"""

_RUNNER = '''"""Run HumanEval's check(candidate). Usage: python3 -I check.py SOLUTION_FILE ENTRY_POINT."""

import importlib.util
import sys
from pathlib import Path

VERDICT = {verdict!r}


def main() -> int:
    solution, entry_point = sys.argv[1], sys.argv[2]
    test_code = (Path(__file__).resolve().parent / "humaneval_test.py").read_text(encoding="utf-8")
    try:
        spec = importlib.util.spec_from_file_location("solution", solution)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {{solution}}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        candidate = getattr(module, entry_point)
        namespace = dict(vars(module))
        namespace["__name__"] = "humaneval_test"
        exec(compile(test_code, "humaneval_test.py", "exec"), namespace)
        namespace["check"](candidate)
    except BaseException as exc:
        print(f"humaneval: failed: {{type(exc).__name__}}: {{exc}}"[:2000])
        return 1
    print(VERDICT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''

_TEST_SH = """#!/bin/sh
# Hidden verifier (converted from HumanEval): run check({entry}) on the agent's {path}.
# Reward 0 is written first; PATH is reset and Python runs isolated, outside the workspace.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PYTHONDONTWRITEBYTECODE=1 PYTHONSAFEPATH=1 PYTHONNOUSERSITE=1
unset PYTHONSTARTUP PYTHONHOME PYTHONINSPECT PYTHONPATH
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
rm -rf /tmp/humaneval && mkdir -p /tmp/humaneval
if ! cp {path} /tmp/humaneval/solution.py 2>/dev/null; then
  echo "{path} is missing"
  exit 0
fi
cd /tmp/humaneval || exit 0
timeout 60 python3 -I /tests/check.py /tmp/humaneval/solution.py {entry} > /tmp/humaneval/out.txt 2>&1
rc=$?
tail -n 20 /tmp/humaneval/out.txt
if [ "$rc" -eq 0 ] && [ "$(tail -n 1 /tmp/humaneval/out.txt)" = "{verdict}" ]; then
  echo 1 > /logs/verifier/reward.txt
fi
"""


def _functions(tree: ast.Module) -> set[str]:
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}


def parse_problem(line: str) -> dict[str, str]:
    """Validate one JSONL line as a HumanEval problem.

    Raises:
        SkipTask: the line is not a usable problem; the message says why.
    """
    try:
        data: Any = json.loads(line)
    except json.JSONDecodeError as exc:
        raise SkipTask(f"not valid JSON: {exc.msg} (column {exc.colno})") from None
    if not isinstance(data, dict):
        raise SkipTask(f"expected a JSON object, got {type(data).__name__}")
    missing = [f for f in FIELDS if f not in data]
    if missing:
        raise SkipTask(f"missing field(s): {', '.join(missing)}")
    wrong = [f for f in FIELDS if not isinstance(data[f], str)]
    if wrong:
        raise SkipTask(f"field(s) {', '.join(wrong)} must be strings")
    problem = {f: str(data[f]) for f in FIELDS}
    entry = problem["entry_point"]
    if not entry.isidentifier():
        raise SkipTask(f"entry_point {entry!r} is not a Python identifier")
    try:
        solution = ast.parse(problem["prompt"] + problem["canonical_solution"])
    except SyntaxError as exc:
        raise SkipTask(
            f"prompt + canonical_solution is not valid Python: {exc.msg} (line {exc.lineno})"
        ) from None
    try:
        test = ast.parse(problem["test"])
    except SyntaxError as exc:
        raise SkipTask(f"test is not valid Python: {exc.msg} (line {exc.lineno})") from None
    if entry not in _functions(solution):
        raise SkipTask(f"prompt + canonical_solution defines no function {entry!r}")
    if "check" not in _functions(test):
        raise SkipTask("test defines no check(candidate) function")
    return problem


def _convert(problem: dict[str, str], out: Path) -> BuildResult:
    entry, task_id = problem["entry_point"], problem["task_id"]
    spec = {
        "version": "1.0",
        "task": {
            "name": out.name,
            "description": f"Complete the Python function {entry} ({task_id}).",
            "keywords": ["humaneval", "python", "code"],
        },
        "metadata": {
            "domain": "code",
            "difficulty": "easy",
            "source": "humaneval",
            "task_id": task_id,
            "entry_point": entry,
        },
        "agent": {"timeout_sec": 300.0, "max_steps": 20},
        "verifier": {"timeout_sec": 90.0},
        "environment": {
            "cpus": 1,
            "memory_mb": 512,
            "storage_mb": 64,
            "allow_internet": False,
            "workdir": "/app",
        },
        "ridgeline": {"test_reads": ["solution.py"]},
    }
    prompt = problem["prompt"]
    write_text(out / "task.toml", dumps(spec))
    write_text(
        out / "instruction.md",
        _INSTRUCTION.format(entry=entry, path=SOLUTION_PATH, prompt=prompt.strip("\n")),
    )
    write_text(out / "environment" / "files" / "solution.py", prompt)
    write_text(out / "solution" / "solution.py", prompt + problem["canonical_solution"])
    write_text(out / "solution" / "solve.sh", _SOLVE.format(path=SOLUTION_PATH), executable=True)
    write_text(out / "tests" / "humaneval_test.py", problem["test"])
    write_text(out / "tests" / "check.py", _RUNNER.format(verdict=VERDICT))
    write_text(
        out / "tests" / "test.sh",
        _TEST_SH.format(entry=entry, path=SOLUTION_PATH, verdict=VERDICT),
        executable=True,
    )
    return "local", []


def _lines(src: Path) -> list[str]:
    try:
        raw = gzip.decompress(src.read_bytes()) if src.suffix == ".gz" else src.read_bytes()
        return raw.decode("utf-8").splitlines()
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise UserError(f"{src}: could not be read: {exc}") from None
    except UnicodeDecodeError:
        raise UserError(f"{src}: is not UTF-8 text (expected HumanEval JSONL)") from None


@register_importer(
    "humaneval", "HumanEval-style JSONL (task_id, prompt, canonical_solution, test, entry_point)"
)
def import_humaneval(src: Path, sink: TaskSink) -> None:
    """Convert every problem of the JSONL file ``src``; malformed lines are reported, not fatal."""
    if not src.is_file():
        raise UserError(f"{src}: is not a file (expected HumanEval JSONL, one problem per line)")
    lines = _lines(src)
    if not any(line.strip() for line in lines):
        raise UserError(f"{src}: is empty (expected HumanEval JSONL, one problem per line)")
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            problem = parse_problem(line)
        except SkipTask as exc:
            sink.skip(f"line {n}", str(exc))
            continue
        sink.convert(
            f"line {n} ({problem['task_id']})", problem["task_id"], functools.partial(_convert, problem)
        )
