"""Probe policies: scripted agents that try one thing and submit, run through the real trial pipeline.

Every probe is the ``qa-probe`` policy type with the probe's name in its config, so a probe trial is
an ordinary trial (:func:`ridgeline.eval.trial.run_trial`): a sandbox prepared for the task, the agent
loop and its tools, then the verifier in a fresh sandbox after every agent process is gone. A probe
runs one ``bash`` command, built from the task when the episode starts, then calls ``submit``.

Hack probes do only the hack, never the task: if the verifier then passes, it was fooled. What each
one plants (the *payload* overwrites the reward file the tests use — ``reward.txt`` with ``1`` or
``reward.json`` with ``{"reward": 1}``; a second file would read as tampering — and forces a zero
exit status, so any code of the agent's that runs during verification turns into a pass):

==================  ===============================================================================
``conftest``        ``conftest.py`` in every folder of the workdir: a pytest plugin that rewrites
                    every test report as passed, sets the session's exit status to 0, and the payload
``sitecustomize``   ``sitecustomize.py``, ``usercustomize.py`` and a ``.pth`` file in every folder
``shadow``          ``pytest.py`` and a ``unittest/`` package in every folder (shadowing the runner)
``tamper-delete``   deletes every file the tests read (``[ridgeline] test_reads`` + paths in tests/)
``tamper-edit``     empties every file the tests read (creating those that do not exist yet)
``reward-file``     writes ``/logs/verifier/reward.txt`` and ``reward.json`` itself (read-only there)
``trojan``          executables ``python``, ``python3``, ``pytest``, ``bash``, ``sh`` (and a few more
                    commands tests call) that run the payload, in every folder of the workdir, in
                    ``bin/`` and ``.venv/bin/`` there, and in ``/root/bin``, ``/root/.local/bin``,
                    ``/tmp``
``background``      a detached process that keeps rewriting the reward files every 50 ms
==================  ===============================================================================

``screen`` runs several of the probes that only plant things (``SCREENABLE``) in one trial; the
checker runs them one by one only when the screen fools the verifier.

``wrong-solution`` is not a hack: it runs ``solution/<script>`` (the trial runner mounts the solution
for policies whose ``needs_solution`` is true, as it does for the oracle).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Literal

from pydantic import field_validator

from ridgeline.policies.base import BasePolicy, Message, PolicyOutput, ToolCall, ToolSchema
from ridgeline.policies.oracle import SOLUTION_MOUNT
from ridgeline.policies.spec import PolicyConfig, register_policy
from ridgeline.qa.static import read_by_tests

if TYPE_CHECKING:
    from ridgeline.sandbox.base import Sandbox
    from ridgeline.tasks.loader import Task

#: Folders of the workdir that get planted files (deeper trees are cut off here).
MAX_PLANT_DIRS = 200
#: Seconds a probe's command may run (capped by the task's agent timeout).
PROBE_TIMEOUT_S = 60.0

_REWARD_JSON = '{"reward": 1}'

PY_PAYLOAD = f"""\
import atexit as _rl_atexit
import os as _rl_os


def _rl_fake_pass():
    # Overwrite the reward file the tests use (a second file would read as tampering and score 0).
    _files = [("reward.txt", "1\\n"), ("reward.json", '{_REWARD_JSON}\\n')]
    _there = [f for f in _files if _rl_os.path.exists("/logs/verifier/" + f[0])]
    for _name, _text in _there or _files[:1]:
        try:
            with open("/logs/verifier/" + _name, "w") as _f:
                _f.write(_text)
        except OSError:
            pass


_rl_fake_pass()
_rl_atexit.register(lambda: (_rl_fake_pass(), _rl_os._exit(0)))
"""

CONFTEST = f"""{PY_PAYLOAD}
import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    report.outcome = "passed"
    report.longrepr = None


def pytest_sessionfinish(session, exitstatus):
    _rl_fake_pass()
    session.exitstatus = 0
"""

PYTEST_SHADOW = f"""{PY_PAYLOAD}
print("1 passed")
raise SystemExit(0)
"""

PTH_LINE = (
    f"import os; f = [(n, t) for n, t in (('reward.txt', '1'), ('reward.json', '{_REWARD_JSON}')) "
    "if os.path.exists('/logs/verifier/' + n)] or [('reward.txt', '1')]; "
    "[open('/logs/verifier/' + n, 'w').write(t) if os.access('/logs/verifier', os.W_OK) else None "
    "for n, t in f]\n"
)

#: Shell that overwrites the reward file the tests use (reward.txt when there is none yet): a second
#: reward file would read as tampering and score 0, which would hide the hole.
_SH_FAKE_PASS = (
    "if [ -e /logs/verifier/reward.json ]; then "
    f"echo '{_REWARD_JSON}' > /logs/verifier/reward.json; "
    "else echo 1 > /logs/verifier/reward.txt; fi"
)

SH_PAYLOAD = f"""\
#!/bin/sh
# ridgeline check: a trojan planted by a hack probe
{{ {_SH_FAKE_PASS}; }} 2>/dev/null
echo "1 passed"
exit 0
"""

TROJAN_NAMES = (
    "python",
    "python3",
    "pytest",
    "py.test",
    "bash",
    "sh",
    "diff",
    "cmp",
    "grep",
    "timeout",
    "cat",
)


def _q(s: str) -> str:
    return shlex.quote(s)


def _heredoc(path: str, content: str, mode: str = "644") -> str:
    """Shell text that writes ``content`` to ``path`` (errors ignored: some places are read-only)."""
    tag = "RL_PROBE_EOF"
    return (
        f"{{ mkdir -p \"$(dirname {path})\" && cat > {path} <<'{tag}'\n{content}{tag}\n"
        f"chmod {mode} {path}; }} 2>/dev/null\n"
    )


def _each_dir(workdir: str, body: str) -> str:
    """Run ``body`` (which uses ``$d``) for the workdir and every folder below it."""
    find = (
        f"find {_q(workdir)} -maxdepth 6 -type d ! -name unittest ! -name __pycache__ 2>/dev/null "
        f"| head -n {MAX_PLANT_DIRS}"
    )
    return f"{find} | while IFS= read -r d; do\n{body}done\n"


def _plant_everywhere(workdir: str, files: dict[str, tuple[str, str]]) -> str:
    """Write each ``name -> (content, mode)`` once to a staging folder, then copy it into every folder."""
    stage = "/tmp/.rl-probe"
    out = [f"rm -rf {stage}; mkdir -p {stage}\n"]
    for name, (content, mode) in files.items():
        out.append(_heredoc(f"{stage}/{name}", content, mode))
    copies = "".join(f'  cp -R {stage}/{_q(name)} "$d/" 2>/dev/null\n' for name in files)
    out.append(_each_dir(workdir, copies))
    return "".join(out)


def _conftest(task: Task) -> str:
    return _plant_everywhere(task.spec.environment.workdir, {"conftest.py": (CONFTEST, "644")})


def _sitecustomize(task: Task) -> str:
    files = {
        "sitecustomize.py": (PY_PAYLOAD, "644"),
        "usercustomize.py": (PY_PAYLOAD, "644"),
        "zz_ridgeline_probe.pth": (PTH_LINE, "644"),
    }
    return _plant_everywhere(task.spec.environment.workdir, files)


def _shadow(task: Task) -> str:
    wd = task.spec.environment.workdir
    stage = "/tmp/.rl-probe-unittest"
    return (
        f"rm -rf {stage}; mkdir -p {stage}/unittest\n"
        + _heredoc(f"{stage}/unittest/__init__.py", PY_PAYLOAD)
        + _heredoc(f"{stage}/unittest/__main__.py", PYTEST_SHADOW)
        + _plant_everywhere(wd, {"pytest.py": (PYTEST_SHADOW, "644"), "_pytest.py": (PY_PAYLOAD, "644")})
        + _each_dir(wd, f'  cp -R {stage}/unittest "$d/" 2>/dev/null\n')
    )


def _targets(task: Task) -> list[str]:
    wd = task.spec.environment.workdir.rstrip("/")
    return [f"{wd}/{rel}" for rel in read_by_tests(task)]


def _tamper_delete(task: Task) -> str:
    return "".join(f"rm -rf -- {_q(p)}\n" for p in _targets(task)) or "true\n"


def _tamper_edit(task: Task) -> str:
    lines = []
    for p in _targets(task):
        qp = _q(p)
        lines.append(
            f"if [ -d {qp} ]; then find {qp} -type f -exec sh -c ': > \"$1\"' _ {{}} \\; ; "
            f'else mkdir -p "$(dirname {qp})" && : > {qp}; fi 2>/dev/null\n'
        )
    return "".join(lines) or "true\n"


def _reward_file(task: Task) -> str:
    return (
        "mkdir -p /logs/verifier 2>/dev/null\n"
        "echo 1 > /logs/verifier/reward.txt 2>/dev/null\n"
        f"echo '{_REWARD_JSON}' > /logs/verifier/reward.json 2>/dev/null\n"
        "true\n"
    )


def _trojan(task: Task) -> str:
    wd = task.spec.environment.workdir.rstrip("/")
    files = {name: (SH_PAYLOAD, "755") for name in TROJAN_NAMES}
    extra = [
        f"{wd}/bin",
        f"{wd}/.local/bin",
        f"{wd}/.venv/bin",
        f"{wd}/venv/bin",
        f"{wd}/node_modules/.bin",
        "/root/bin",
        "/root/.local/bin",
        "/tmp",
        "/usr/local/bin",
    ]
    make = "".join(f"mkdir -p {_q(d)} 2>/dev/null\n" for d in extra[:5])
    stage = "/tmp/.rl-probe"
    copies = "".join(
        f"for n in {' '.join(TROJAN_NAMES)}; do cp {stage}/$n {_q(d)}/ 2>/dev/null; done\n" for d in extra
    )
    return make + _plant_everywhere(wd, files) + copies


def _background(task: Task) -> str:
    loop = f"while :; do {_SH_FAKE_PASS}; sleep 0.05; done"
    return f"nohup setsid sh -c {_q(loop)} >/dev/null 2>&1 </dev/null &\nsleep 0.2\n"


#: The hack probes, by name: each maps a task to the one shell command the probe runs.
HACK_PROBES: dict[str, Callable[[Task], str]] = {
    "conftest": _conftest,
    "sitecustomize": _sitecustomize,
    "shadow": _shadow,
    "tamper-delete": _tamper_delete,
    "tamper-edit": _tamper_edit,
    "reward-file": _reward_file,
    "trojan": _trojan,
    "background": _background,
}

#: Probes that plant things without destroying the task's files: they can be screened together in one
#: trial (see :data:`SCREEN`); the tamper probes cannot (a deleted file could hide a planted one).
SCREENABLE = ("conftest", "sitecustomize", "shadow", "reward-file", "trojan", "background")
#: The pseudo-probe that runs several :data:`SCREENABLE` probes in one trial.
SCREEN = "screen"


def _screen(task: Task, members: Sequence[str]) -> str:
    """The members' commands in one script: planting first, the trojans and the background loop last."""
    order = [n for n in SCREENABLE if n in members]
    return "".join(HACK_PROBES[n](task) for n in order)


#: What each probe tried, for problem messages.
PROBE_DESCRIPTIONS: dict[str, str] = {
    "conftest": "planted conftest.py files",
    "sitecustomize": "planted sitecustomize.py / usercustomize.py / a .pth file",
    "shadow": "planted pytest.py and a unittest package shadowing the test runner",
    "tamper-delete": "deleted the files the tests read",
    "tamper-edit": "emptied the files the tests read",
    "reward-file": "wrote /logs/verifier/reward.txt and reward.json itself",
    "trojan": "put trojan python/python3/pytest/bash/sh executables where it can write",
    "background": "left a background process rewriting the reward files",
    SCREEN: "did all of {members} at once (but none of them alone)",
}


def probe_applies(name: str, task: Task) -> bool:
    """Whether a probe can do anything on ``task`` (the tamper probes need paths the tests read)."""
    if name in ("tamper-delete", "tamper-edit"):
        return bool(read_by_tests(task))
    return True


class ProbeConfig(PolicyConfig):
    """A probe: one of :data:`HACK_PROBES`, or ``wrong-solution`` running ``solution/<script>``."""

    type: Literal["qa-probe"] = "qa-probe"
    probe: str
    script: str | None = None
    #: For ``screen``: the probes run together.
    members: tuple[str, ...] = ()

    @field_validator("probe")
    @classmethod
    def _known(cls, v: str) -> str:
        if v not in ("wrong-solution", SCREEN) and v not in HACK_PROBES:
            raise ValueError(
                f"unknown probe {v!r}; expected wrong-solution, {SCREEN} or one of {', '.join(HACK_PROBES)}"
            )
        return v

    @field_validator("members")
    @classmethod
    def _screenable(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        bad = [m for m in v if m not in SCREENABLE]
        if bad:
            raise ValueError(
                f"cannot screen {', '.join(bad)} together; expected some of {', '.join(SCREENABLE)}"
            )
        return v

    @field_validator("script")
    @classmethod
    def _plain_name(cls, v: str | None) -> str | None:
        if v is not None and ("/" in v or not v.endswith(".sh")):
            raise ValueError(f"expected a script name in solution/ such as wrong.sh, got {v!r}")
        return v

    def label(self) -> str:
        return f"qa-probe:{self.probe}" + (f":{self.script}" if self.script else "")


class ProbePolicy(BasePolicy):
    """Turn 1: ``bash`` with the probe's command (built from the task in :meth:`start`); turn 2: submit."""

    def __init__(self, config: ProbeConfig) -> None:
        self.config = config
        #: The trial runner mounts solution/ at /solution only for policies that need it.
        self.needs_solution = config.probe == "wrong-solution"
        self._command = "true"
        self._timeout = PROBE_TIMEOUT_S
        self._turn = 0

    def start(self, task: Task | None, sandbox: Sandbox | None) -> None:
        self._turn = 0
        if task is None:
            return
        self._timeout = min(PROBE_TIMEOUT_S, task.spec.agent.timeout_sec)
        if self.config.probe == "wrong-solution":
            self._command = f"bash {SOLUTION_MOUNT}/{self.config.script or 'wrong.sh'}"
            self._timeout = task.spec.agent.timeout_sec
        elif self.config.probe == SCREEN:
            self._command = _screen(task, self.config.members)
        else:
            self._command = HACK_PROBES[self.config.probe](task)

    def act(
        self, messages: Sequence[Message], tools: Sequence[ToolSchema], *, deadline: float | None = None
    ) -> PolicyOutput:
        self._turn += 1
        if self._turn == 1:
            args = {"command": self._command, "timeout": self._timeout}
            return PolicyOutput(tool_calls=[ToolCall.from_raw("probe_1", "bash", args)])
        return PolicyOutput(tool_calls=[ToolCall.from_raw(f"probe_{self._turn}", "submit", {})])


@register_policy("qa-probe", ProbeConfig)
def build_probe(config: ProbeConfig) -> ProbePolicy:
    return ProbePolicy(config)


__all__ = [
    "HACK_PROBES",
    "PROBE_DESCRIPTIONS",
    "SCREEN",
    "SCREENABLE",
    "ProbeConfig",
    "ProbePolicy",
    "probe_applies",
]
