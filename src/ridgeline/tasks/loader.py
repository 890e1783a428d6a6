"""Load a task directory into a :class:`Task`, turning every defect into one clear :class:`TaskError`."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ridgeline.errors import TaskError
from ridgeline.tasks.hashing import hash_tree
from ridgeline.tasks.spec import TaskSpec

REQUIRED_FILES = ("task.toml", "instruction.md", "tests/test.sh", "solution/solve.sh")


@dataclass(frozen=True)
class Task:
    """A loaded task: where it lives, its frozen spec, its instruction and its content hash."""

    path: Path
    spec: TaskSpec
    instruction: str
    hash: str

    @property
    def name(self) -> str:
        return self.spec.task.name or self.path.name

    @property
    def domain(self) -> str:
        return self.spec.domain

    @property
    def files_dir(self) -> Path:
        return self.path / "environment" / "files"

    @property
    def setup_script(self) -> Path:
        return self.path / "environment" / "setup.sh"

    @property
    def tests_dir(self) -> Path:
        return self.path / "tests"

    @property
    def solution_dir(self) -> Path:
        return self.path / "solution"

    def wrong_solutions(self) -> list[Path]:
        return sorted(self.solution_dir.glob("wrong*.sh"))


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _format_validation(err: ValidationError) -> str:
    parts = []
    for e in err.errors():
        loc = [str(x) for x in e["loc"]]
        section, field = (loc[0], ".".join(loc[1:])) if len(loc) > 1 else ("", ".".join(loc))
        where = f"[{section}] {field}" if section and field else (f"[{section}]" if section else field)
        msg = e["msg"]
        if e["type"] in ("model_type", "dict_type"):
            msg = "expected a table (a [section])"
        elif "input" in e and e["type"] != "missing":
            msg = f"{msg} (got {_describe(e['input'])})"
        parts.append(f"{where}: {msg}")
    return "; ".join(parts)


def parse_spec(toml_path: Path) -> TaskSpec:
    """Parse and validate a ``task.toml`` file."""
    try:
        data = tomllib.loads(toml_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TaskError(str(toml_path), "file is missing (every task needs a task.toml)") from None
    except UnicodeDecodeError:
        raise TaskError(str(toml_path), "is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise TaskError(str(toml_path), f"is not valid TOML: {exc}") from None
    try:
        return TaskSpec.model_validate(data)
    except ValidationError as exc:
        raise TaskError(str(toml_path), _format_validation(exc)) from None


def load_task(path: str | Path) -> Task:
    """Load and validate the task directory at ``path``.

    Raises:
        TaskError: the directory is not a valid task; the message names the file and field.
    """
    root = Path(path)
    if not root.is_dir():
        raise TaskError(str(root), "is not a directory (a task is a directory holding task.toml)")
    spec = parse_spec(root / "task.toml")
    for rel in REQUIRED_FILES[1:]:
        f = root / rel
        if not f.is_file():
            raise TaskError(
                str(f),
                "file is missing (a task needs task.toml, instruction.md, "
                "tests/test.sh and solution/solve.sh)",
            )
    env = root / "environment"
    if env.exists() and not env.is_dir():
        raise TaskError(str(env), "must be a directory")
    files = env / "files"
    if files.exists() and not files.is_dir():
        raise TaskError(str(files), "must be a directory whose contents are copied into the workdir")
    try:
        instruction = (root / "instruction.md").read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise TaskError(str(root / "instruction.md"), "is not UTF-8 text") from None
    if not instruction.strip():
        raise TaskError(str(root / "instruction.md"), "is empty (the agent needs an instruction)")
    return Task(path=root.resolve(), spec=spec, instruction=instruction, hash=hash_tree(root))


def discover_tasks(paths: list[str] | list[Path]) -> list[Path]:
    """Expand a list of task directories or folders of task directories (recursively) into task dirs."""
    found: list[Path] = []
    for p in map(Path, paths):
        if (p / "task.toml").is_file():
            found.append(p)
        elif p.is_dir():
            subs = sorted(t.parent for t in p.rglob("task.toml"))
            if not subs:
                raise TaskError(str(p), "holds no task (no task.toml found below it)")
            found.extend(subs)
        else:
            raise TaskError(str(p), "does not exist or is not a task directory")
    return found
