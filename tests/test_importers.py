"""``ridgeline import``: Harbor, Terminal-Bench and HumanEval sources become tasks that load and run."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import tomllib
from pathlib import Path
from typing import Any

import pytest

from _cli import run_cli
from ridgeline.errors import UserError
from ridgeline.tasks import hash_tree, load_task
from ridgeline.tasks.importers import ImportReport, import_tasks, list_importers, task_dir_name
from ridgeline.tasks.importers._dockerfile import parse_dockerfile, plan_dockerfile
from ridgeline.tasks.importers._toml import dumps
from ridgeline.tasks.importers.harbor import size_mb
from ridgeline.tasks.importers.humaneval import parse_problem

FIXTURES = Path(__file__).parent / "fixtures" / "import"
HARBOR = FIXTURES / "harbor"
TBENCH = FIXTURES / "terminal-bench"
HUMANEVAL = FIXTURES / "humaneval" / "problems.jsonl"

needs_sandbox = pytest.mark.skipif(
    shutil.which("bwrap") is None or os.geteuid() != 0, reason="the bwrap backend needs bubblewrap and root"
)


def toml(path: Path) -> dict[str, Any]:
    return tomllib.loads(path.read_text())


def outcome(task_dir: Path, policy: str, trial_dir: Path) -> dict[str, Any]:
    from ridgeline.eval.trial import run_trial
    from ridgeline.policies import parse_policy_spec

    return run_trial(load_task(task_dir), parse_policy_spec(policy), trial_dir)


def assert_oracle_passes_nop_fails(task_dir: Path, tmp: Path) -> None:
    oracle = outcome(task_dir, "oracle", tmp / "oracle")
    assert oracle["passed"] is True, oracle
    nop = outcome(task_dir, "nop", tmp / "nop")
    assert nop["passed"] is False, nop


# -- harbor -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def harbor(tmp_path_factory: pytest.TempPathFactory) -> tuple[ImportReport, Path]:
    out = tmp_path_factory.mktemp("harbor") / "tasks"
    return import_tasks("harbor", HARBOR, out), out


def test_harbor_report(harbor: tuple[ImportReport, Path]) -> None:
    report, out = harbor
    assert {c.name: c.backend for c in report.converted} == {
        "build-tools": "container",
        "sum-numbers": "local",
    }
    assert [(s.source, s.reason) for s in report.skipped] == [
        ("no-solution", "solution/solve.sh is missing (every Ridgeline task needs a reference solution)")
    ]
    saved = json.loads((out / "import.json").read_text())
    assert saved["n_converted"] == 2 and saved["n_skipped"] == 1
    for c in report.converted:
        load_task(out / c.name)


def test_harbor_plain_dockerfile_runs_locally(harbor: tuple[ImportReport, Path]) -> None:
    _, out = harbor
    task = out / "sum-numbers"
    spec = toml(task / "task.toml")
    assert spec["environment"]["workdir"] == "/app"
    # Harbor's deprecated size strings become numbers of MiB
    assert spec["environment"]["memory_mb"] == 512 and spec["environment"]["storage_mb"] == 1024
    assert "memory" not in spec["environment"]
    assert spec["ridgeline"]["env"] == {"LC_ALL": "C.UTF-8", "REPORT_TITLE": "Sum report"}
    assert spec["metadata"]["source"] == "harbor" and spec["metadata"]["category"] == "data-processing"
    files = sorted(p.relative_to(task / "environment").as_posix() for p in (task / "environment").rglob("*"))
    assert files == ["files", "files/data", "files/data/numbers.txt", "files/notes.txt", "setup.sh"]
    assert "mkdir -p '/app/out'" in (task / "environment" / "setup.sh").read_text()
    assert "dockerfile" not in spec["ridgeline"]


def test_harbor_complex_dockerfile_keeps_it_with_reasons(harbor: tuple[ImportReport, Path]) -> None:
    report, out = harbor
    (c,) = [c for c in report.converted if c.name == "build-tools"]
    task = out / "build-tools"
    spec = toml(task / "task.toml")
    assert spec["ridgeline"]["dockerfile"] == "environment/Dockerfile"
    reasons = spec["ridgeline"]["container_reasons"]
    assert any(r.startswith("RUN apt-get update") and "needs a container build" in r for r in reasons)
    assert any("$PATH" in r for r in reasons) and any(r.startswith("USER nobody") for r in reasons)
    assert (task / "environment" / "Dockerfile").read_bytes() == (
        HARBOR / "build-tools/environment/Dockerfile"
    ).read_bytes()
    assert (task / "environment" / "config.json").is_file()
    assert spec["environment"]["workdir"] == "/srv/app"
    assert any("tests/test.sh fetches software" in n for n in c.notes)


@needs_sandbox
def test_harbor_local_task_passes_oracle_fails_nop(harbor: tuple[ImportReport, Path], tmp_path: Path) -> None:
    assert_oracle_passes_nop_fails(harbor[1] / "sum-numbers", tmp_path)


# -- terminal-bench ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tbench(tmp_path_factory: pytest.TempPathFactory) -> tuple[ImportReport, Path]:
    out = tmp_path_factory.mktemp("tbench") / "tasks"
    return import_tasks("terminal-bench", TBENCH, out), out


def test_terminal_bench_conversion(tbench: tuple[ImportReport, Path]) -> None:
    report, out = tbench
    assert {c.name: c.backend for c in report.converted} == {"csv-total": "local", "web-service": "container"}
    assert report.skipped == []
    task = load_task(out / "csv-total")
    assert task.instruction.startswith("The file /app/sales.csv lists sales")
    assert task.spec.agent.timeout_sec == 240.0 and task.spec.verifier.timeout_sec == 60.0
    assert task.spec.task.keywords == ("csv", "fixture")
    assert task.spec.metadata["difficulty"] == "easy" and task.domain == "data-processing"
    assert (task.files_dir / "sales.csv").read_text().startswith("region,amount")
    assert sorted(p.name for p in task.files_dir.iterdir()) == ["sales.csv"]  # no tests, no solution
    assert (task.tests_dir / "run-tests.sh").read_bytes() == (TBENCH / "csv-total/run-tests.sh").read_bytes()
    assert "TEST_DIR=/tests" in (task.tests_dir / "test.sh").read_text()
    assert (task.solution_dir / "solve.sh").read_bytes() == (TBENCH / "csv-total/solution.sh").read_bytes()
    assert os.access(task.solution_dir / "solve.sh", os.X_OK)


def test_terminal_bench_container_task(tbench: tuple[ImportReport, Path]) -> None:
    report, out = tbench
    (c,) = [c for c in report.converted if c.name == "web-service"]
    task = load_task(out / "web-service")
    assert task.instruction.startswith("Start the API service")
    reasons = task.spec.ridgeline.container_reasons
    assert reasons[0] == "docker-compose defines 2 services; that needs a container engine"
    assert any("apt-get install" in r for r in reasons)
    env = sorted(p.name for p in (task.path / "environment").iterdir())
    assert env == ["Dockerfile", "docker-compose.yaml", "server.py"]  # the build context without tests
    assert any("run_tests_in_same_shell" in n for n in c.notes)
    assert any("run-tests.sh fetches software" in n for n in c.notes)


@needs_sandbox
def test_terminal_bench_local_task_passes_oracle_fails_nop(
    tbench: tuple[ImportReport, Path], tmp_path: Path
) -> None:
    assert_oracle_passes_nop_fails(tbench[1] / "csv-total", tmp_path)


# -- humaneval --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def humaneval(tmp_path_factory: pytest.TempPathFactory) -> tuple[ImportReport, Path]:
    out = tmp_path_factory.mktemp("humaneval") / "tasks"
    return import_tasks("humaneval", HUMANEVAL, out), out


def test_humaneval_conversion(humaneval: tuple[ImportReport, Path]) -> None:
    report, out = humaneval
    assert [c.name for c in report.converted] == ["fixture-0", "fixture-1"]
    assert [s.source for s in report.skipped] == ["line 2"]
    assert report.skipped[0].reason.startswith("not valid JSON")
    task = load_task(out / "fixture-0")
    problem = json.loads(HUMANEVAL.read_text().splitlines()[0])
    assert (task.files_dir / "solution.py").read_text() == problem["prompt"]
    assert "`running_max`" in task.instruction and "/app/solution.py" in task.instruction
    assert (task.tests_dir / "humaneval_test.py").read_text() == problem["test"]
    assert (task.solution_dir / "solution.py").read_text() == problem["prompt"] + problem[
        "canonical_solution"
    ]
    assert task.spec.metadata["task_id"] == "Fixture/0" and task.domain == "code"


def _line(**fields: object) -> str:
    base = {"task_id": "x", "prompt": "def f():\n", "canonical_solution": "  pass\n", "entry_point": "f"}
    return json.dumps({**base, "test": "def check(candidate):\n  pass\n", **fields})


def test_humaneval_reads_gzip(tmp_path: Path) -> None:
    gz = tmp_path / "problems.jsonl.gz"
    gz.write_bytes(gzip.compress(HUMANEVAL.read_bytes()))
    report = import_tasks("humaneval", gz, tmp_path / "out")
    assert [c.name for c in report.converted] == ["fixture-0", "fixture-1"]
    import_tasks("humaneval", HUMANEVAL, tmp_path / "plain")
    for name in ("fixture-0", "fixture-1"):
        assert hash_tree(tmp_path / "out" / name) == hash_tree(tmp_path / "plain" / name)


def test_humaneval_valid_line_parses() -> None:
    assert parse_problem(_line())["entry_point"] == "f"


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("[1, 2]", "expected a JSON object, got list"),
        ('{"task_id": "x"}', "missing field(s): prompt, canonical_solution, test, entry_point"),
        (_line(task_id=1), "field(s) task_id must be strings"),
        (_line(prompt="def f(:\n"), "prompt + canonical_solution is not valid Python"),
        (_line(prompt="def g():\n"), "defines no function 'f'"),
        (_line(test="x = 1"), "test defines no check(candidate) function"),
        (_line(entry_point="a b"), "is not a Python identifier"),
    ],
)
def test_humaneval_malformed_lines(line: str, reason: str) -> None:
    from ridgeline.tasks.importers import SkipTask

    with pytest.raises(SkipTask, match=re.escape(reason)):
        parse_problem(line)


@needs_sandbox
@pytest.mark.parametrize("name", ["fixture-0", "fixture-1"])
def test_humaneval_task_passes_oracle_fails_nop(
    humaneval: tuple[ImportReport, Path], name: str, tmp_path: Path
) -> None:
    assert_oracle_passes_nop_fails(humaneval[1] / name, tmp_path)


@needs_sandbox
@pytest.mark.parametrize(
    "body",
    [
        "    return sorted(numbers)\n",  # wrong answer
        "    import sys\n    sys.exit(0)\n",  # exits before check() can fail
        "    import os\n    os._exit(0)\n",  # kills the interpreter: no verdict line
    ],
)
def test_humaneval_wrong_or_evasive_solution_fails(
    humaneval: tuple[ImportReport, Path], body: str, tmp_path: Path
) -> None:
    from ridgeline.eval.trial import run_trial
    from ridgeline.policies.spec import MockConfig

    task = load_task(humaneval[1] / "fixture-0")
    code = (task.files_dir / "solution.py").read_text() + body
    policy = MockConfig.model_validate(
        {
            "outputs": [
                {
                    "tool_calls": [
                        {"name": "write_file", "arguments": {"path": "solution.py", "content": code}}
                    ]
                },
                {"tool_calls": [{"name": "submit", "arguments": {}}]},
            ]
        }
    )
    rec = run_trial(task, policy, tmp_path / "trial")
    assert rec["status"] == "ok" and rec["passed"] is False, rec


# -- Dockerfile analysis ----------------------------------------------------------------------------


def test_parse_dockerfile_joins_continuations_and_drops_comments() -> None:
    text = "# comment\nfrom python:3.12 \\\n  AS base\n\nRUN a \\\n  # inner comment\n  && b\nenv X=1\n"
    got = [(i.lineno, i.keyword, i.args) for i in parse_dockerfile(text)]
    assert got == [(2, "FROM", "python:3.12 AS base"), (5, "RUN", "a && b"), (8, "ENV", "X=1")]


def test_plan_plain_dockerfile() -> None:
    plan = plan_dockerfile(
        "FROM docker.io/library/ubuntu:24.04\nARG D=data\nWORKDIR /srv\nWORKDIR app\n"
        'COPY ["a.txt", "b.txt", "./in/"]\nCOPY --chmod=755 $D/ ${D}/\nENV A=1 B="two words"\n'
        "ENV C legacy value\nENV D2=$A-x\nRUN mkdir -p out && mkdir /srv/app/logs\nLABEL x=y\nEXPOSE 80\n"
    )
    assert plan.local, plan.reasons
    assert plan.base_image == "docker.io/library/ubuntu:24.04" and plan.workdir == "/srv/app"
    assert plan.env == {"A": "1", "B": "two words", "C": "legacy value", "D2": "1-x"}
    assert [(c.sources, c.dest, c.dest_is_dir, c.chmod) for c in plan.copies] == [
        (("a.txt", "b.txt"), "/srv/app/in", True, None),
        (("data/",), "/srv/app/data", True, 0o755),
    ]
    assert plan.mkdirs == ["/srv/app/out", "/srv/app/logs"]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (
            "FROM python:3.12\nRUN pip install numpy\n",
            "RUN pip install numpy (at line 2) needs a container build",
        ),
        ("FROM node:20\nWORKDIR /app\n", "base image node:20 brings software"),
        ("FROM python:3.12 AS b\nFROM python:3.12\n", "multi-stage build"),
        ("FROM python:3.12\nCOPY --from=b /x /y\n", "COPY --from"),
        ("FROM python:3.12\nADD https://example.com/x.tgz /app/\n", "ADD at line 2"),
        ("FROM python:3.12\nUSER app\n", "USER app at line 2"),
        ("FROM python:3.12\nENV PATH=/opt/bin:$PATH\n", "uses $PATH from the base image"),
        ("FROM $IMG\n", "FROM at line 1 names its image through $IMG"),
        ("WORKDIR /app\n", "no FROM instruction"),
        ('FROM python:3.12\nENTRYPOINT ["x"]\n', "ENTRYPOINT at line 2"),
    ],
)
def test_plan_container_reasons(text: str, reason: str) -> None:
    plan = plan_dockerfile(text)
    assert not plan.local
    assert any(reason in r for r in plan.reasons), plan.reasons


def test_copy_outside_the_workdir_needs_a_container(tmp_path: Path) -> None:
    src = tmp_path / "src" / "t"
    shutil.copytree(HARBOR / "sum-numbers", src)
    df = src / "environment" / "Dockerfile"
    df.write_text(df.read_text().replace("COPY notes.txt /app/", "COPY notes.txt /etc/notes.txt"))
    report = import_tasks("harbor", src, tmp_path / "out")
    (c,) = report.converted
    assert c.backend == "container"
    assert any("COPY to /etc/notes.txt (line 6) lies outside the workdir /app" in n for n in c.notes)


def test_missing_copy_source_is_reported(tmp_path: Path) -> None:
    src = tmp_path / "src" / "t"
    shutil.copytree(HARBOR / "sum-numbers", src)
    (src / "environment" / "notes.txt").unlink()
    code = import_tasks("harbor", src.parent, tmp_path / "out")
    assert code.converted == []
    assert code.skipped[0].reason == "COPY source 'notes.txt' (line 6) is not in the build context"


@pytest.mark.parametrize(
    ("value", "mb"),
    [("4G", 4096), ("512M", 512), ("1.5Gi", 1536), ("2GB", 2048), (2048, 2048), ("1T", 1048576)],
)
def test_size_mb(value: object, mb: int) -> None:
    assert size_mb(value, "memory") == mb


def test_toml_writer_round_trips() -> None:
    data = {
        "version": "1.0",
        "task": {"name": 'a "quoted" name\n', "keywords": ["x", "y"]},
        "metadata": {"n": 3, "f": 0.5, "ok": True, "nested": {"deep": {"k": "v"}}, "odd key": 1},
        "ridgeline": {"env": {"A": "1"}, "checkpoints": [{"name": "c", "check": "true", "weight": 2.0}]},
    }
    assert tomllib.loads(dumps(data)) == data


# -- the import command ------------------------------------------------------------------------------


def test_import_is_idempotent_and_refuses_to_overwrite(tmp_path: Path) -> None:
    for kind, src in (("harbor", HARBOR), ("terminal-bench", TBENCH), ("humaneval", HUMANEVAL)):
        a, b = tmp_path / kind / "a", tmp_path / kind / "b"
        import_tasks(kind, src, a)
        import_tasks(kind, src, b)
        names = sorted(p.name for p in a.iterdir())
        assert names == sorted(p.name for p in b.iterdir())
        for name in names:
            if (a / name).is_dir():
                assert hash_tree(a / name) == hash_tree(b / name)
        assert (a / "import.json").read_bytes() == (b / "import.json").read_bytes()
        with pytest.raises(UserError, match="is not empty; choose a new --out or pass --force"):
            import_tasks(kind, src, a)
        before = {p.name: hash_tree(a / p.name) for p in a.iterdir() if p.is_dir()}
        (a / "stale").mkdir()
        import_tasks(kind, src, a, force=True)
        assert {p.name: hash_tree(a / p.name) for p in a.iterdir() if p.is_dir()} == before


def test_import_user_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="unknown import kind 'swebench'; expected one of: harbor, humaneval"):
        import_tasks("swebench", HARBOR, tmp_path / "o")
    with pytest.raises(UserError, match="does not exist"):
        import_tasks("harbor", tmp_path / "missing", tmp_path / "o")
    with pytest.raises(UserError, match="holds no Harbor task"):
        import_tasks("harbor", tmp_path, tmp_path / "o")
    with pytest.raises(UserError, match="is not a file"):
        import_tasks("humaneval", HARBOR, tmp_path / "o")
    (tmp_path / "f").write_text("x")
    with pytest.raises(UserError, match="is a file"):
        import_tasks("humaneval", HUMANEVAL, tmp_path / "f")
    assert not (tmp_path / "o").exists()


def test_registry_and_names() -> None:
    assert [i.kind for i in list_importers()] == ["harbor", "humaneval", "terminal-bench"]
    assert task_dir_name("HumanEval/12") == "humaneval-12"
    assert task_dir_name("  Weird Name!! ") == "weird-name"
    assert task_dir_name("///") == "task"


def test_cli_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = run_cli(
        ["import", "humaneval", str(HUMANEVAL), "--out", str(tmp_path / "he")], monkeypatch, capsys
    )
    assert code == 0
    assert "fixture-0" in out and "line 2" in out and "not valid JSON" in out
    assert "imported 2 task(s)" in out

    code, out = run_cli(["import", "harbor", str(HARBOR), "--out", str(tmp_path / "h")], monkeypatch, capsys)
    assert code == 0 and "[ridgeline] env" in out and "no-solution" in out

    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n{}\n")
    code, out = run_cli(
        ["import", "humaneval", str(bad), "--out", str(tmp_path / "none")], monkeypatch, capsys
    )
    assert code == 1 and "nothing converted" in out
    assert not (tmp_path / "none").exists()

    for args in (
        ["import", "nope", str(HUMANEVAL), "--out", str(tmp_path / "x")],
        ["import", "harbor", str(tmp_path / "missing"), "--out", str(tmp_path / "x")],
        ["import", "humaneval", str(HUMANEVAL), "--out", str(tmp_path / "he")],
    ):
        code, out = run_cli(args, monkeypatch, capsys)
        assert code == 1
        assert out.strip().startswith("error:") and len(out.strip().splitlines()) == 1, out
