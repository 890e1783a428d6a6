"""The task format: scaffold, load, validate, content hash, and one clear message per defect."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from _cli import run_cli
from ridgeline.errors import TaskError, UserError
from ridgeline.tasks import hash_tree, load_task
from ridgeline.tasks.scaffold import scaffold_task


@pytest.fixture
def task_dir(tmp_path: Path) -> Path:
    return scaffold_task("demo", tmp_path)


def _edit_toml(task: Path, old: str, new: str) -> Path:
    toml = task / "task.toml"
    text = toml.read_text()
    assert old in text
    toml.write_text(text.replace(old, new))
    return toml


# -- scaffold + load ---------------------------------------------------------------------------------


def test_scaffolded_task_loads(task_dir: Path) -> None:
    task = load_task(task_dir)
    assert task.name == "demo"
    assert task.domain == "terminal"
    assert task.spec.difficulty == "easy"
    assert task.spec.task.keywords == ("example",)
    assert task.spec.environment.memory_mb == 512
    assert task.spec.environment.allow_internet is False
    assert task.spec.environment.workdir == "/app"
    assert "hello, demo" in task.instruction
    assert task.hash.startswith("sha256:")
    assert (task_dir / "tests/test.sh").stat().st_mode & 0o111
    assert (task_dir / "solution/solve.sh").stat().st_mode & 0o111


def test_scaffolded_task_validates_in_process(
    task_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = run_cli(["task", "validate", str(task_dir)], monkeypatch, capsys)
    assert code == 0, out
    assert "1 valid, 0 invalid" in out


def test_validate_exit_codes_through_the_installed_command(task_dir: Path) -> None:
    exe = Path(sys.executable).parent / "ridgeline"
    ok = subprocess.run([exe, "task", "validate", task_dir], capture_output=True, text=True, check=False)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    _edit_toml(task_dir, "memory_mb = 512", 'memory_mb = "2gb"')
    bad = subprocess.run([exe, "task", "validate", task_dir], capture_output=True, text=True, check=False)
    assert bad.returncode == 1
    assert "Traceback" not in bad.stdout + bad.stderr


def test_validate_walks_folders_of_tasks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    scaffold_task("one", tmp_path)
    scaffold_task("two", tmp_path)
    code, out = run_cli(["task", "validate", str(tmp_path)], monkeypatch, capsys)
    assert code == 0
    assert "2 valid, 0 invalid" in out


# -- one clear message per defect ---------------------------------------------------------------------


def _break_bad_toml(t: Path) -> Path:
    toml = t / "task.toml"
    toml.write_text("version = \n[task\n")
    return toml


def _break_memory(t: Path) -> Path:
    return _edit_toml(t, "memory_mb = 512", 'memory_mb = "2gb"')


def _break_internet(t: Path) -> Path:
    return _edit_toml(t, "allow_internet = false", 'allow_internet = "yes"')


def _break_section(t: Path) -> Path:
    toml = _edit_toml(t, "[agent]\ntimeout_sec = 120.0\nmax_steps = 20\n", "")
    toml.write_text("agent = 3\n" + toml.read_text())  # top level, before the first [table]
    return toml


def _break_keywords(t: Path) -> Path:
    return _edit_toml(t, 'keywords = ["example"]', "keywords = [1]")


def _drop_test(t: Path) -> Path:
    (t / "tests/test.sh").unlink()
    return t / "tests/test.sh"


def _drop_instruction(t: Path) -> Path:
    (t / "instruction.md").unlink()
    return t / "instruction.md"


def _empty_instruction(t: Path) -> Path:
    (t / "instruction.md").write_text("  \n\n")
    return t / "instruction.md"


@pytest.mark.parametrize(
    ("breaker", "must_mention"),
    [
        (_break_bad_toml, ["not valid TOML", "line"]),
        (_break_memory, ["[environment] memory_mb", "integer", "'2gb'"]),
        (_break_internet, ["[environment] allow_internet", "boolean", "'yes'"]),
        (_break_section, ["agent", "expected a table"]),
        (_break_keywords, ["keywords", "string"]),
        (_drop_test, ["file is missing"]),
        (_drop_instruction, ["file is missing"]),
        (_empty_instruction, ["is empty"]),
    ],
    ids=[
        "bad-toml",
        "memory-str",
        "internet-str",
        "section-not-table",
        "keyword-int",
        "no-test",
        "no-instruction",
        "empty-instruction",
    ],
)
def test_defect_gives_one_clear_message(
    task_dir: Path,
    breaker: object,
    must_mention: list[str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert callable(breaker)
    bad_file = breaker(task_dir)
    with pytest.raises(TaskError) as info:
        load_task(task_dir)
    assert info.value.path == str(bad_file)
    assert "\n" not in str(info.value)

    code, out = run_cli(["task", "validate", str(task_dir)], monkeypatch, capsys)
    assert code == 1
    assert "Traceback" not in out
    invalid = [line for line in out.splitlines() if line.startswith("invalid")]
    assert len(invalid) == 1, out
    line = invalid[0]
    assert str(bad_file) in line
    for text in must_mention:
        assert text in line, line
    assert "0 valid, 1 invalid" in out


def test_missing_task_toml_is_reported(tmp_path: Path) -> None:
    (tmp_path / "t").mkdir()
    with pytest.raises(TaskError, match=r"task\.toml: file is missing"):
        load_task(tmp_path / "t")


def test_validate_nonexistent_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = run_cli(["task", "validate", str(tmp_path / "nope")], monkeypatch, capsys)
    assert code == 1
    assert "does not exist" in out
    assert "Traceback" not in out


def test_strict_types_do_not_coerce(task_dir: Path) -> None:
    _edit_toml(task_dir, "max_steps = 20", 'max_steps = "20"')
    with pytest.raises(TaskError, match=r"\[agent\] max_steps"):
        load_task(task_dir)


def test_integers_are_accepted_for_float_fields(task_dir: Path) -> None:
    _edit_toml(task_dir, "timeout_sec = 120.0", "timeout_sec = 120")
    assert load_task(task_dir).spec.agent.timeout_sec == 120.0


# -- unknown keys round-trip ----------------------------------------------------------------------------


def test_unknown_keys_are_kept(task_dir: Path) -> None:
    toml = task_dir / "task.toml"
    text = toml.read_text().replace("[agent]\n", "[agent]\nharbor_only = 7\n")
    toml.write_text(text + '\n[ridgeline]\nfuture_flag = "x"\n\n[other_tool]\nsetting = true\n')
    spec = load_task(task_dir).spec
    assert spec.agent.model_extra == {"harbor_only": 7}
    assert spec.ridgeline.model_extra == {"future_flag": "x"}
    assert spec.model_extra == {"other_tool": {"setting": True}}
    assert spec.metadata["domain"] == "terminal"


# -- content hash -------------------------------------------------------------------------------------


def test_hash_is_stable(task_dir: Path, tmp_path: Path) -> None:
    twin = scaffold_task("demo", tmp_path / "elsewhere")
    assert hash_tree(task_dir) == hash_tree(task_dir)
    assert hash_tree(task_dir) == hash_tree(twin)


@pytest.mark.parametrize(
    "rel",
    ["task.toml", "instruction.md", "tests/test.sh", "solution/solve.sh", "environment/files/README.txt"],
)
def test_hash_changes_with_any_file_bytes(task_dir: Path, rel: str) -> None:
    before = hash_tree(task_dir)
    f = task_dir / rel
    data = f.read_bytes()
    f.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))  # same size, one bit different
    assert hash_tree(task_dir) != before


def test_hash_changes_with_new_file_and_exec_bit(task_dir: Path) -> None:
    before = hash_tree(task_dir)
    (task_dir / "environment/files/extra.txt").write_text("x")
    added = hash_tree(task_dir)
    assert added != before
    (task_dir / "environment/files/extra.txt").chmod(0o755)
    assert hash_tree(task_dir) != added


def test_hash_changes_when_exec_bit_is_dropped(task_dir: Path) -> None:
    before = hash_tree(task_dir)
    (task_dir / "tests/test.sh").chmod(0o644)
    assert hash_tree(task_dir) != before


def test_hash_changes_when_a_file_moves(task_dir: Path) -> None:
    before = hash_tree(task_dir)
    (task_dir / "environment/files/README.txt").rename(task_dir / "environment/files/README2.txt")
    assert hash_tree(task_dir) != before


def test_hash_ignores_caches(task_dir: Path) -> None:
    before = hash_tree(task_dir)
    cache = task_dir / "tests" / "__pycache__"
    cache.mkdir()
    (cache / "test.cpython-311.pyc").write_bytes(b"\x00\x01")
    (task_dir / ".pytest_cache").mkdir()
    (task_dir / ".pytest_cache" / "v").write_text("x")
    assert hash_tree(task_dir) == before
    assert load_task(task_dir).hash == before


# -- task new -----------------------------------------------------------------------------------------


def test_task_new_cli_creates_a_valid_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = run_cli(["task", "new", "fresh", "--dir", str(tmp_path)], monkeypatch, capsys)
    assert code == 0, out
    assert load_task(tmp_path / "fresh").name == "fresh"


def test_task_new_refuses_to_overwrite(
    task_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (task_dir / "instruction.md").write_text("my own words\n")
    code, out = run_cli(["task", "new", "demo", "--dir", str(task_dir.parent)], monkeypatch, capsys)
    assert code == 1
    assert "already exists" in out
    assert "Traceback" not in out
    assert (task_dir / "instruction.md").read_text() == "my own words\n"


@pytest.mark.parametrize("name", ["Bad", "has space", "../escape", "a/b", "-lead", "", "x" * 65, ".hidden"])
def test_task_new_rejects_bad_names(tmp_path: Path, name: str) -> None:
    with pytest.raises(UserError, match="is invalid"):
        scaffold_task(name, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_task_new_bad_name_on_the_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = run_cli(["task", "new", "Nope", "--dir", str(tmp_path)], monkeypatch, capsys)
    assert code == 1
    assert "'Nope' is invalid" in out
    assert "Traceback" not in out
