"""The HTML report and the ``compare`` / ``report`` commands."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ridgeline.cli import main
from ridgeline.errors import UserError
from ridgeline.eval.report import MAX_FIELD_CHARS, write_report

EVIL = "<script>alert('pwned')</script>"


def run_cli(
    args: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, str]:
    """Run ``ridgeline ARGS`` through the real entry point; return (exit code, stdout, stderr)."""
    monkeypatch.setattr(sys, "argv", ["ridgeline", *args])
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


def _trial(task: str, attempt: int, passed: bool | None, **kw: Any) -> dict[str, Any]:
    t: dict[str, Any] = {
        "task": task,
        "task_hash": f"sha256:{task}",
        "domain": "terminal",
        "difficulty": "easy",
        "attempt": attempt,
        "status": "ok" if passed is not None else "infra_fail",
        "reward": None if passed is None else float(passed),
        "passed": passed,
        "steps": 3,
        "wall_s": 2.5,
        "tokens": {"prompt": 1000, "cached": 100, "completion": 200},
        "cost_usd": 0.002,
        "tool_calls": 2,
        "invalid_tool_calls": 0,
        "required_steps": 2,
        "trajectory": f"trials/{task}-{attempt}/trajectory.json",
    }
    t.update(kw)
    return t


def make_run(root: Path, trials: list[dict[str, Any]], agent: str = "mock:scripted") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "results.json").write_text(
        json.dumps({"agent": agent, "policy_digest": "d1", "k": 2, "trials": trials})
    )
    return root


def write_trajectory(root: Path, rel: str, doc: Any) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))


STEPS = [
    {"index": 0, "role": "user", "content": "Create greeting.txt"},
    {
        "index": 1,
        "role": "assistant",
        "tool_calls": [{"function": {"name": "bash", "arguments": {"cmd": "ls"}}}],
    },
    {"index": 2, "kind": "observation", "observation": EVIL, "exit_code": 0},
    {"index": 3, "role": "assistant", "content": "done & <b>dusted</b>"},
]


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    trials = [
        _trial("greet", 0, True),
        _trial("greet", 1, False, status="step_limit", steps=20),
        _trial(
            "<img src=x onerror=alert(1)>", 0, False, domain="fin<ance>", difficulty="hard", status="timeout"
        ),
        _trial("<img src=x onerror=alert(1)>", 1, None),
        _trial("broken", 0, True, steps=5, required_steps=7),
        _trial("broken", 1, True, trajectory=None),
    ]
    root = make_run(tmp_path / "run", trials)
    write_trajectory(root, "trials/greet-0/trajectory.json", {"policy": "mock", "steps": STEPS})
    write_trajectory(
        root, "trials/greet-1/trajectory.json", {"steps": [{"index": 0, "role": "user", "content": "x"}]}
    )
    write_trajectory(root, "trials/broken-0/trajectory.json", "{not json")
    write_trajectory(root, "trials/<img src=x onerror=alert(1)>-0/trajectory.json", [1, 2, EVIL])
    return root


# -- the HTML -------------------------------------------------------------------------------------------


def test_report_escapes_everything(run_dir: Path) -> None:
    path = write_report(run_dir)
    assert path == run_dir / "report.html"
    page = path.read_text()
    assert html_escaped(EVIL) in page
    assert "alert('pwned')" not in page
    assert "<img" not in page
    assert "<ance>" not in page
    assert "done &amp; &lt;b&gt;dusted&lt;/b&gt;" in page
    # exactly one script element, ours, and no outside resource
    assert page.count("<script") == 1
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "<link" not in page


def html_escaped(text: str) -> str:
    for raw, entity in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ("'", "&#x27;"), ('"', "&quot;")):
        text = text.replace(raw, entity)
    return text


def test_report_has_one_details_per_step(run_dir: Path) -> None:
    page = write_report(run_dir).read_text()
    assert page.count('<details class="step">') == len(STEPS) + 1  # greet-0 and greet-1
    # a trajectory that is JSON but not {"steps": [...]} is shown whole, escaped
    assert 'no "steps" list; the whole file' in page
    assert html_escaped(json.dumps(EVIL)) in page
    assert page.count('<details class="trial"') == 6
    assert "calls bash" in page  # a tool-call step is summarised by the tool names
    assert "4 steps" in page


def test_report_survives_missing_and_broken_trajectories(run_dir: Path) -> None:
    page = write_report(run_dir).read_text()
    assert "trajectory missing (no trajectory path recorded)" in page
    assert "trajectory unreadable (trials/broken-0/trajectory.json: JSONDecodeError" in page
    assert "trajectory missing (trials/greet-9" not in page
    (run_dir / "trials/greet-1/trajectory.json").unlink()
    page = write_report(run_dir).read_text()
    assert "trajectory missing (trials/greet-1/trajectory.json)" in page


def test_report_shows_summary_charts_and_failure_modes(run_dir: Path) -> None:
    page = write_report(run_dir).read_text()
    # 3 passes out of 5 scored trials; the infra failure is excluded
    assert "60.0%" in page
    assert "excluded from every rate" in page
    for caption in (
        "pass rate by domain",
        "pass rate by difficulty",
        "pass rate by required steps",
        "steps per trial",
        "tokens per trial",
    ):
        assert caption in page
    assert page.count("<svg") == 6
    assert 'class="err"' in page  # error bars
    for status in ("step_limit", "timeout", "infra_fail"):
        assert f">{status}</text>" in page
    assert "pass@1" in page and "pass@2" not in page  # one task has a single scored trial


def test_long_fields_are_cut(tmp_path: Path) -> None:
    root = make_run(tmp_path / "run", [_trial("big", 0, True)])
    write_trajectory(
        root, "trials/big-0/trajectory.json", {"steps": [{"role": "tool", "content": "x" * 50_000}]}
    )
    page = write_report(root).read_text()
    assert f"{50_000 - MAX_FIELD_CHARS:,} more characters not shown" in page
    assert "x" * (MAX_FIELD_CHARS + 1) not in page


def test_report_to_another_file(run_dir: Path, tmp_path: Path) -> None:
    out = write_report(run_dir / "results.json", tmp_path / "out" / "r.html")
    assert out.is_file()
    assert not (run_dir / "report.html").exists()


def test_report_of_a_missing_run_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"results\.json: file is missing"):
        write_report(tmp_path / "nope")


# -- commands -----------------------------------------------------------------------------------------------


def test_report_command_prints_the_path(
    run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_cli(["report", str(run_dir)], monkeypatch, capsys)
    assert code == 0
    assert out.strip() == str(run_dir / "report.html")
    target = tmp_path / "elsewhere.html"
    code, out, _ = run_cli(["report", str(run_dir), "--out", str(target)], monkeypatch, capsys)
    assert code == 0 and out.strip() == str(target) and target.is_file()


def test_compare_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    names = [f"t{i}" for i in range(10)]
    a = make_run(
        tmp_path / "a", [_trial(t, 0, i < 2) for i, t in enumerate(names)] + [_trial("gone", 0, True)]
    )
    b = make_run(tmp_path / "b", [_trial(t, 0, True) for t in names], agent="better-agent")
    out_json = tmp_path / "cmp" / "c.json"
    code, out, err = run_cli(["compare", str(a), str(b), "--json", str(out_json)], monkeypatch, capsys)
    assert code == 0, err
    assert "verdict: B is better than A" in out
    assert "better-agent" in out
    assert "only in A (1): gone" in out
    assert "fail → pass (8)" in out
    data = json.loads(out_json.read_text())
    assert data["overall"]["verdict"] == "better"
    assert data["only_in_a"] == ["gone"]


def test_compare_identical_runs(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_cli(["compare", str(run_dir), str(run_dir)], monkeypatch, capsys)
    assert code == 0
    assert "verdict: B is indistinguishable from A" in out


@pytest.mark.parametrize(
    ("content", "field"),
    [
        ('{"trials": [', "is not valid JSON"),
        ('{"agent": "x"}', "trials: missing"),
        ('{"trials": [{"task": "t", "passed": true}]}', "trials[0].status: missing"),
    ],
)
def test_compare_bad_results_is_one_line(
    tmp_path: Path,
    content: str,
    field: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    good = make_run(tmp_path / "good", [_trial("t", 0, True)])
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "results.json").write_text(content)
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(["compare", "good", "bad"], monkeypatch, capsys)
    assert code == 1
    assert "Traceback" not in out + err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert f"{Path('bad') / 'results.json'}: {field}" in lines[0]
    assert good.is_dir()


def _bad_run(tmp_path: Path) -> Path:
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "results.json").write_text("{oops")
    return Path(sys.executable).parent / "ridgeline"


def test_report_bad_results_through_the_installed_command(tmp_path: Path) -> None:
    exe = _bad_run(tmp_path)
    proc = subprocess.run([exe, "report", "run"], cwd=tmp_path, capture_output=True, text=True, check=False)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stdout + proc.stderr
    assert proc.stderr.startswith("error: ") and proc.stderr.count("error:") == 1
    assert "run/results.json: is not valid JSON (Expecting property name" in " ".join(proc.stderr.split())


def test_user_error_is_one_physical_line(tmp_path: Path) -> None:
    exe = _bad_run(tmp_path)
    env = {**os.environ, "COLUMNS": "80"}
    proc = subprocess.run(
        [exe, "report", "run"], cwd=tmp_path, env=env, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 1
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_report_to_an_unwritable_place_is_a_user_error(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(["report", str(run_dir), "--out", str(run_dir)], monkeypatch, capsys)
    assert code == 1
    assert f"{run_dir}: cannot write the report (Is a directory)" in " ".join(err.split())  # rich may fold it
    assert "Traceback" not in out + err
