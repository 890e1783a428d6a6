"""``ridgeline task new``: write a small, valid task that the oracle passes and nop fails."""

from __future__ import annotations

import re
from pathlib import Path

from ridgeline.errors import UserError

_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")

_TOML = """version = "1.0"

[task]
name = "{name}"
description = "Write a greeting file."
keywords = ["example"]

[metadata]
difficulty = "easy"
domain = "terminal"

[agent]
timeout_sec = 120.0
max_steps = 20

[verifier]
timeout_sec = 60.0

[environment]
cpus = 1
memory_mb = 512
storage_mb = 64
allow_internet = false
workdir = "/app"
"""

_INSTRUCTION = """Create the file `/app/greeting.txt` containing exactly the line `hello, {name}`.
"""

_TEST = """#!/bin/sh
# Hidden test: copied to /tests only after the agent has finished.
if [ "$(cat /app/greeting.txt 2>/dev/null)" = "hello, {name}" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""

_SOLVE = """#!/bin/sh
# Reference solution: run by the oracle agent with this folder mounted at /solution.
printf 'hello, {name}\\n' > /app/greeting.txt
"""


def scaffold_task(name: str, parent: Path) -> Path:
    """Create ``parent/name`` as a complete, valid task. Refuses to overwrite anything."""
    if not _NAME.match(name):
        raise UserError(
            f"task name {name!r} is invalid: expected lowercase letters, digits, '.', '_' or '-' "
            "(at most 64 characters, starting with a letter or digit)"
        )
    root = parent / name
    if root.exists():
        raise UserError(f"{root}: already exists; choose another name or --dir")
    files = {
        "task.toml": _TOML,
        "instruction.md": _INSTRUCTION,
        "tests/test.sh": _TEST,
        "solution/solve.sh": _SOLVE,
        "environment/files/README.txt": "Files here are copied into the workdir (/app).\n",
    }
    for rel, text in files.items():
        f = root / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text.format(name=name), encoding="utf-8")
        if rel.endswith(".sh"):
            f.chmod(0o755)
    return root
