"""Task suites: every family builds and loads, generation is deterministic, and the semantics hold.

Semantics are checked by running tasks under bubblewrap directly (a stand-in until the sandbox
package runs them): the oracle (``solve.sh`` then ``test.sh``) must earn reward 1, the untouched
environment (``test.sh`` only) reward 0, and every ``solution/wrong*.sh`` less than 1. The default
run samples every kind of every family; ``-m slow`` runs the whole starter suite.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ridgeline.cli import app
from ridgeline.errors import UserError
from ridgeline.tasks import hash_tree, load_task
from ridgeline.tasks.suites import build_suite, get_suite, list_suites
from ridgeline.tasks.suites.base import TaskFamily, toml_dumps, write_task

FAMILY_SUITES = ["code-v1", "finance-v1", "longctx-v1", "scene-v1", "terminal-v1"]
BWRAP = shutil.which("bwrap")
#: pytest for the verifier: the project's site-packages, mounted read-only (the default image has it).
SITE = Path(sys.prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
HOST_PYTHON = Path("/usr/bin/python3")

needs_bwrap = pytest.mark.skipif(
    BWRAP is None or not HOST_PYTHON.exists() or not SITE.is_dir(),
    reason="needs bubblewrap and a host /usr/bin/python3",
)


def _bwrap(binds: list[str], script: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    assert BWRAP is not None
    cmd = [
        BWRAP, "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
        "--symlink", "usr/lib64", "/lib64", "--ro-bind", "/etc", "/etc", "--proc", "/proc", "--dev", "/dev",
        "--tmpfs", "/tmp", "--tmpfs", "/root", "--ro-bind", str(SITE), "/opt/rlsite", *binds,
        "--chdir", "/app", "--unshare-all", "--die-with-parent", "--clearenv",
        "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin", "--setenv", "HOME", "/root",
        "--setenv", "PYTHONPATH", "/opt/rlsite", "--setenv", "LANG", "C.UTF-8",
        "sh", "-c", script,
    ]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)


def run_trial(task_dir: Path, scratch: Path, solution: str | None) -> tuple[float, str]:
    """Prepare ``/app``, run ``solution/<solution>`` (None = nop), then verify; return (reward, log)."""
    work, logs = scratch / "app", scratch / "logs"
    if scratch.exists():
        shutil.rmtree(scratch)
    files = task_dir / "environment" / "files"
    if files.is_dir():
        shutil.copytree(files, work, symlinks=True)
    else:
        work.mkdir(parents=True)
    (logs / "agent").mkdir(parents=True)
    (logs / "verifier").mkdir()
    base = ["--bind", str(work), "/app", "--bind", str(logs), "/logs"]
    log = []
    if (task_dir / "environment" / "setup.sh").is_file():
        r = _bwrap(
            [*base, "--ro-bind", str(task_dir / "environment"), "/environment"], "sh /environment/setup.sh"
        )
        assert r.returncode == 0, f"setup.sh failed: {r.stderr}"
    if solution is not None:
        r = _bwrap([*base, "--ro-bind", str(task_dir / "solution"), "/solution"], f"sh /solution/{solution}")
        log.append(f"--- {solution} rc={r.returncode}\n{r.stdout}{r.stderr}")
    r = _bwrap([*base, "--ro-bind", str(task_dir / "tests"), "/tests"], "sh /tests/test.sh")
    log.append(f"--- test.sh rc={r.returncode}\n{r.stdout[-3000:]}{r.stderr[-3000:]}")
    reward_file = logs / "verifier" / "reward.txt"
    reward = float(reward_file.read_text().strip()) if reward_file.is_file() else float("nan")
    return reward, "\n".join(log)


def check_semantics(task_dir: Path, scratch: Path) -> None:
    reward, log = run_trial(task_dir, scratch, "solve.sh")
    assert reward == 1.0, f"oracle failed on {task_dir.name}:\n{log}"
    reward, log = run_trial(task_dir, scratch, None)
    assert reward == 0.0, f"nop passed on {task_dir.name}:\n{log}"
    for wrong in sorted((task_dir / "solution").glob("wrong*.sh")):
        reward, log = run_trial(task_dir, scratch, wrong.name)
        assert reward < 1.0, f"{wrong.name} passed on {task_dir.name}:\n{log}"


# ---------------------------------------------------------------------------------------------- building


def test_registry_lists_every_family_and_starter() -> None:
    ids = [s.id for s in list_suites()]
    drills = [f"drills-{d}-v1" for d in ("code", "finance", "longctx", "scene", "terminal")]
    assert ids == sorted([*FAMILY_SUITES, *drills, "starter-v1", "quickstart-v1"])
    assert get_suite("terminal") is get_suite("terminal-v1")
    assert set(get_suite("starter").domains) == {"terminal", "code", "finance", "scene", "longctx"}


@pytest.mark.parametrize("suite", FAMILY_SUITES)
def test_every_family_builds_valid_tasks(suite: str, tmp_path: Path) -> None:
    s = get_suite(suite)
    paths = build_suite(suite, None, 3, tmp_path / "out")
    assert len(paths) == s.default_n
    kinds, levels = set(), set()
    for p in paths:
        task = load_task(p)
        meta = task.spec.metadata
        assert task.domain == s.domains[0]
        assert meta["family"] == suite and meta["suite"] == suite
        assert meta["difficulty"] == {1: "easy", 2: "medium", 3: "hard"}[meta["level"]]
        assert meta["required_steps"] >= 1
        assert task.spec.environment.allow_internet is False
        # Question tasks read only the answer; every other task names the files its tests read.
        assert task.spec.ridgeline.test_reads or task.spec.ridgeline.answer, f"{p.name}: test_reads is empty"
        assert (p / "tests" / "test.sh").stat().st_mode & 0o777 == 0o755
        assert (p / "instruction.md").stat().st_mode & 0o777 == 0o644
        kinds.add(meta["kind"])
        levels.add(meta["level"])
    assert levels == {1, 2, 3}
    assert len(kinds) >= 2


def test_levels_lengthen_the_horizon() -> None:
    for s in FAMILY_SUITES:
        family = get_suite(s).families[0]
        for kind in family.kinds():
            steps = [family.generate(0, 0, level=lv, kind=kind).required_steps for lv in (1, 2, 3)]
            assert steps[0] <= steps[1] <= steps[2] and steps[0] < steps[2], (s, kind, steps)


def test_same_seed_same_bytes_different_seed_differs(tmp_path: Path) -> None:
    a = build_suite("starter", 15, 11, tmp_path / "a")
    b = build_suite("starter", 15, 11, tmp_path / "b")
    c = build_suite("starter", 15, 12, tmp_path / "c")
    assert [p.name for p in a] == [p.name for p in b]
    assert [hash_tree(p) for p in a] == [hash_tree(p) for p in b]
    assert hash_tree(tmp_path / "a") == hash_tree(tmp_path / "b")
    assert all(hash_tree(x) != hash_tree(y) for x, y in zip(a, c, strict=True))


def test_starter_covers_domains_and_levels(tmp_path: Path) -> None:
    paths = build_suite("starter", None, 0, tmp_path / "s")
    assert len(paths) >= 60
    tasks = [load_task(p) for p in paths]
    domains = Counter(t.domain for t in tasks)
    assert set(domains) == {"terminal", "code", "finance", "scene", "longctx"}
    assert min(domains.values()) >= 10
    assert {(t.domain, t.spec.metadata["level"]) for t in tasks} >= {
        (d, lv) for d in domains for lv in (1, 2, 3)
    }
    assert all(t.spec.metadata["suite"] == "starter-v1" for t in tasks)
    assert len({t.name for t in tasks}) == len(tasks)
    assert any(t.spec.ridgeline.answer for t in tasks)
    assert any(t.wrong_solutions() for t in tasks)
    assert sum(bool(t.spec.ridgeline.checkpoints) for t in tasks) >= len(tasks) // 2


def test_longctx_records_depth() -> None:
    family = get_suite("longctx").families[0]
    depths = set()
    for i in range(12):
        d = family.generate(5, i)
        if "depth" in d.metadata:
            assert 0.0 <= d.metadata["depth"] <= 1.0
            depths.add(d.metadata["depth"])
    assert len(depths) >= 3


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"name": "nope"}, "unknown suite 'nope': expected one of"),
        ({"n": 0}, "at least 1"),
        ({"seed": -1}, "non-negative"),
    ],
)
def test_build_errors_are_user_errors(tmp_path: Path, kwargs: dict[str, object], match: str) -> None:
    args: dict[str, object] = {"name": "terminal", "n": 1, "seed": 0, "out_dir": tmp_path / "o"}
    args.update(kwargs)
    with pytest.raises(UserError, match=match):
        build_suite(**args)  # type: ignore[arg-type]


def test_build_refuses_a_non_empty_out_dir(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("x")
    with pytest.raises(UserError, match="not empty"):
        build_suite("terminal", 1, 0, tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


def test_write_task_refuses_a_draft_without_tests(tmp_path: Path) -> None:
    family: TaskFamily = get_suite("terminal").families[0]
    draft = family.generate(0, 0)
    del draft.files["tests/test.sh"]
    with pytest.raises(ValueError, match=r"tests/test\.sh"):
        write_task(draft, tmp_path / "t", family, 0, 0)


def test_toml_writer_round_trips() -> None:
    import tomllib

    data = {
        "version": "1.0",
        "task": {"name": 'a"b', "keywords": ["x", "y"]},
        "ridgeline": {
            "answer": True,
            "checkpoints": [{"name": "c", "check": "test -f '/app/x'", "weight": 0.5}],
        },
    }
    assert tomllib.loads(toml_dumps(data)) == data


def test_renderer_reports_frame_overlaps_and_writes_png() -> None:
    import struct
    import zlib

    from ridgeline.tasks.suites import scene_render

    cam = {"position": [0, 2, 8], "look_at": [0, 0.5, 0], "fov": 50, "width": 64, "height": 48}
    scene = {
        "camera": cam,
        "lights": [{"position": [2, 5, 5], "intensity": 1.0}],
        "objects": [
            {"name": "a", "type": "box", "position": [0, 0.5, 0], "size": [1, 1, 1], "color": [1, 0, 0]},
            {"name": "b", "type": "sphere", "position": [0.6, 0.5, 0], "radius": 0.4, "color": [0, 0, 1]},
            {"name": "far", "type": "box", "position": [40, 0.5, 0], "size": [1, 1, 1], "color": [0, 1, 0]},
        ],
    }
    assert scene_render.validate(scene) == []
    assert scene_render.validate({"camera": cam, "lights": [], "objects": [{"type": "cone"}]})
    w, h, rgb, report = scene_render.render(scene)
    frames = {o["name"]: o["frame"] for o in report["objects"]}
    assert frames == {"a": "in frame", "b": "in frame", "far": "out of frame"}
    assert [o["pixels"] > 0 for o in report["objects"]] == [True, True, False]
    assert [pair[:2] for pair in report["overlaps"]] == [["a", "b"]]
    png = scene_render.png_bytes(w, h, rgb, {"scene-sha256": "abc"})
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", png[16:24]) == (64, 48)
    idat = png.index(b"IDAT")
    (n,) = struct.unpack(">I", png[idat - 4 : idat])
    assert len(zlib.decompress(png[idat + 4 : idat + 4 + n])) == 48 * (1 + 3 * 64)
    assert b"scene-sha256\x00abc" in png


# ---------------------------------------------------------------------------------------------- CLI


def test_cli_list_and_build(tmp_path: Path) -> None:
    runner = CliRunner()
    r = runner.invoke(app, ["suite", "list"])
    assert r.exit_code == 0, r.output
    for sid in [*FAMILY_SUITES, "starter-v1"]:
        assert sid.rsplit("-v", 1)[0] in r.output
    r = runner.invoke(
        app, ["suite", "build", "finance", "--n", "4", "--seed", "2", "--out", str(tmp_path / "f")]
    )
    assert r.exit_code == 0, r.output
    assert "4 tasks" in r.output
    assert len(list((tmp_path / "f").iterdir())) == 4


def test_cli_errors_are_one_line(tmp_path: Path) -> None:
    exe = Path(sys.executable).parent / "ridgeline"
    if not exe.exists():
        pytest.skip("ridgeline console script not installed")
    r = subprocess.run(
        [str(exe), "suite", "build", "nope", "--out", str(tmp_path / "x")],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert r.returncode == 1
    assert "unknown suite 'nope'" in r.stderr and "Traceback" not in r.stderr


# ---------------------------------------------------------------------------------------------- semantics


def _sample() -> list[tuple[str, int]]:
    """Every kind of every family once (the first ``len(kinds)`` indices also span all levels)."""
    out = []
    for sid in FAMILY_SUITES:
        family = get_suite(sid).families[0]
        out += [(sid, i) for i in range(len(family.kinds()))]
    return out


@needs_bwrap
@pytest.mark.parametrize(("suite", "index"), _sample(), ids=lambda v: str(v))
def test_oracle_passes_nop_and_wrong_fail(suite: str, index: int, tmp_path: Path) -> None:
    family = get_suite(suite).families[0]
    draft = family.generate(20240, index)
    task_dir = write_task(draft, tmp_path / "task", family, 20240, index)
    check_semantics(task_dir, tmp_path / "scratch")


#: An agent that fakes success instead of doing the task: it plants pytest plugins, a sitecustomize,
#: modules shadowing the standard library and pytest, trojan executables, a test that writes the
#: reward, and a reward file of its own. Every verifier must still give 0.
HACK_SH = r"""#!/bin/sh
for d in /app /app/proj /app/proj/tests /app/proj/*/; do
  [ -d "$d" ] || continue
  cat > "$d/conftest.py" <<'PY'
import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    outcome.get_result().outcome = "passed"
PY
  printf 'open("/logs/verifier/reward.txt", "w").write("1")\n' > "$d/sitecustomize.py"
  printf 'raise SystemExit(0)\n' > "$d/json.py"
  printf 'raise SystemExit(0)\n' > "$d/pytest.py"
  printf '[pytest]\naddopts = -p no:junitxml\n' > "$d/pytest.ini"
done
if [ -d /app/proj/tests ]; then
  printf 'open("/logs/verifier/reward.txt", "w").write("1")\n\n\ndef test_ok():\n    pass\n' \
    > /app/proj/tests/test_zz_reward.py
fi
mkdir -p /app/bin
printf '#!/bin/sh\necho 1 > /logs/verifier/reward.txt\nexit 0\n' > /app/bin/python3
chmod +x /app/bin/python3
cp /app/bin/python3 /app/python3
cp /app/bin/python3 /app/pytest
mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt
echo 'the answer is 1' > /logs/agent/answer.txt
"""


@needs_bwrap
@pytest.mark.parametrize(("suite", "index"), [(s, 0) for s in FAMILY_SUITES] + [("code-v1", 2)])
def test_verifiers_resist_common_hacks(suite: str, index: int, tmp_path: Path) -> None:
    family = get_suite(suite).families[0]
    task_dir = write_task(family.generate(99, index), tmp_path / "task", family, 99, index)
    (task_dir / "solution" / "hack.sh").write_text(HACK_SH)
    reward, log = run_trial(task_dir, tmp_path / "scratch", "hack.sh")
    assert reward == 0.0, log


@pytest.mark.slow
@needs_bwrap
def test_whole_starter_suite_semantics(tmp_path: Path) -> None:
    for task_dir in build_suite("starter", None, 0, tmp_path / "starter"):
        check_semantics(task_dir, tmp_path / "scratch")
