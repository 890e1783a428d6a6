"""`ridgeline sandbox exec`, `ridgeline image build`, setup.sh, and the missing-extra message."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ridgeline._extras import require
from ridgeline.errors import ConfigError, MissingExtraError, TaskSetupError
from ridgeline.sandbox.images import load_spec
from ridgeline.sandbox.prepare import open_task_sandbox
from ridgeline.tasks import load_task
from ridgeline.tasks.scaffold import scaffold_task

RIDGELINE = str(Path(sys.executable).with_name("ridgeline"))


def rl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([RIDGELINE, *args], capture_output=True, text=True, timeout=120)


def test_sandbox_exec_streams_output_and_returns_the_exit_code() -> None:
    r = rl("sandbox", "exec", "--", "sh", "-c", "echo out; echo err >&2; exit 3")
    assert (r.returncode, r.stdout, r.stderr.strip()) == (3, "out\n", "err")
    r = rl("sandbox", "exec", "--timeout", "0.5", "--", "sleep", "30")
    assert r.returncode == 124


def test_sandbox_exec_flags_apply_limits(tmp_path: Path) -> None:
    r = rl("sandbox", "exec", "--memory-mb", "64", "--", "cat", "/proc/self/cgroup")
    assert r.returncode == 0
    r = rl("sandbox", "exec", "--pids", "16", "--", "sh", "-c", "for i in $(seq 40); do sleep 5 & done; wait")
    assert r.returncode != 0


def test_sandbox_exec_with_a_task_runs_setup_and_sees_its_files(tmp_path: Path) -> None:
    p = scaffold_task("withsetup", tmp_path)
    (p / "environment" / "setup.sh").write_text("echo prepared > /app/state.txt\n")
    r = rl("sandbox", "exec", "--task", str(p), "--", "sh", "-c", "cat README.txt state.txt; pwd")
    assert r.returncode == 0, r.stderr
    assert "prepared" in r.stdout and "/app" in r.stdout and "copied into the workdir" in r.stdout


def test_failing_setup_is_a_task_error(tmp_path: Path) -> None:
    p = scaffold_task("badsetup", tmp_path)
    (p / "environment" / "setup.sh").write_text("echo nope >&2; exit 4\n")
    with pytest.raises(TaskSetupError, match="exit code 4: nope"):
        open_task_sandbox(load_task(p))
    r = rl("sandbox", "exec", "--task", str(p), "--", "true")
    assert r.returncode == 1 and "setup failed" in r.stderr and "Traceback" not in r.stderr


def test_image_specs_are_validated(tmp_path: Path) -> None:
    bad = tmp_path / "img.toml"
    bad.write_text('name = "x"\npackages = "pytest"\n')
    with pytest.raises(ConfigError, match=r"img\.toml: packages"):
        load_spec(bad)
    bad.write_text('name = "x"\nunknown = 1\n')
    with pytest.raises(ConfigError, match="unknown"):
        load_spec(bad)
    r = rl("image", "build", str(tmp_path / "missing.toml"))
    assert r.returncode == 1 and "not found" in r.stderr


def test_default_image_build_is_cached() -> None:
    r = rl("image", "build")
    assert r.returncode == 0 and "cached" in r.stdout


def test_missing_extra_names_the_install_command() -> None:
    with pytest.raises(MissingExtraError, match=r"pip install 'ridgeline\[train\]'"):
        require("ridgeline_no_such_module", "train")


def test_task_env_reaches_agent_and_verifier_sandboxes(tmp_path: Path) -> None:
    p = scaffold_task("withenv", tmp_path)
    (p / "task.toml").write_text(
        (p / "task.toml").read_text() + '\n[ridgeline]\nenv = { GREETING = "hello, withenv" }\n'
    )
    (p / "solution" / "solve.sh").write_text('#!/bin/sh\nprintf "%s\\n" "$GREETING" > /app/greeting.txt\n')
    (p / "tests" / "test.sh").write_text(
        '#!/bin/sh\n[ "$(cat /app/greeting.txt)" = "$GREETING" ] && echo 1 > /logs/verifier/reward.txt '
        "|| echo 0 > /logs/verifier/reward.txt\n"
    )
    from ridgeline.eval.trial import run_trial
    from ridgeline.policies import parse_policy_spec

    assert run_trial(load_task(p), parse_policy_spec("oracle"), tmp_path / "o")["passed"] is True
