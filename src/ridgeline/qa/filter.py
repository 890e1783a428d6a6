"""``ridgeline filter``: turn the trajectories of runs into supervised fine-tuning data.

Each trial of each run (``RUN/results.json``; for an interrupted run, its ``trial.json`` files) is
kept or dropped for the first reason that applies, checked in this order:

``unreadable``
    its trajectory file is missing or not a trajectory;
``infra_fail``
    the sandbox or the model service failed: not the agent's behaviour at all;
``agent_error``
    the policy itself raised, so the episode has no proper end;
``touched_protected``
    a tool call mentions the verifier's side of the task: ``/tests``, ``/logs/verifier``,
    ``/solution`` or a ``reward.txt`` / ``reward.json`` (in any argument text, and in path arguments
    resolved against the workdir, so ``read_file("../tests/x")`` counts). Such an episode may have
    learned to look at the answers. The reference solution's own runs (``oracle``) land here;
``truncated``
    the episode was cut off (``step_limit``, ``timeout``, ``token_budget``, ``context_overflow``) or
    the live context was compacted, so the model did not see what the messages show;
``failed``
    the reward is below 1 (or missing), unless ``keep_failed``;
``duplicate``
    an earlier kept trajectory of the same task hash made the same sequence of tool calls
    (normalised: names plus arguments as canonical JSON, whitespace collapsed, null values dropped).

The mention check is a textual heuristic: it catches what an agent writes, not every way a shell
could reach a path (``cd / && cat t*/x``).

Output, in a deterministic order (task, task hash, run order, attempt):

* ``DATASET/sft.jsonl`` — one object per kept trajectory: ``messages`` (OpenAI chat format, with
  ``tool_calls`` and ``tool`` messages; calls skipped after ``submit`` ended the episode are left
  out, since no observation answers them), ``tools`` (the function schemas the model was offered)
  and ``metadata`` {``task``, ``task_hash``, ``domain``, ``reward``, ``policy_digest``,
  ``status``, ``trajectory``, ``trajectory_id``};
* ``DATASET/manifest.json`` — counts kept and dropped by reason, and each dropped trajectory.

Trajectories record tool names, not schemas: built-in tools get their schema from
:func:`ridgeline.tools.default_toolset`, others from ``metadata["tool_schemas"]`` when the
trajectory has it; a tool with neither gets a bare schema and is counted in the manifest.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ridgeline.agent.status import Status
from ridgeline.agent.trajectory import Trajectory
from ridgeline.errors import UserError

#: Drop reasons, in the order they are checked.
DROP_REASONS = (
    "unreadable",
    "infra_fail",
    "agent_error",
    "touched_protected",
    "truncated",
    "failed",
    "duplicate",
)
TRUNCATED = frozenset({Status.STEP_LIMIT, Status.TIMEOUT, Status.TOKEN_BUDGET, Status.CONTEXT_OVERFLOW})
#: Paths on the verifier's side of a task: tests, verifier logs (the reward) and the solution.
PROTECTED_ROOTS = ("/tests", "/logs/verifier", "/solution")
PROTECTED_FILES = ("reward.txt", "reward.json")
_MENTION = re.compile(
    r"(?<![\w.~/-])(?:/tests|/logs/verifier|/solution)(?![\w.-])|(?<![\w-])reward\.(?:txt|json)\b"
)
SFT_FILE = "sft.jsonl"
MANIFEST_FILE = "manifest.json"


@dataclass(frozen=True)
class Candidate:
    """One trial of one run, as listed by the run."""

    run: str
    run_index: int
    record: dict[str, Any]
    trajectory_path: Path

    @property
    def sort_key(self) -> tuple[str, str, int, int, str]:
        attempt = self.record.get("attempt")
        return (
            str(self.record.get("task", "")),
            str(self.record.get("task_hash", "")),
            self.run_index,
            attempt if isinstance(attempt, int) else 0,
            str(self.trajectory_path),
        )


@dataclass
class FilterReport:
    """What :func:`filter_runs` kept and dropped."""

    runs: list[str]
    keep_failed: bool
    n_input: int = 0
    kept: int = 0
    dropped: Counter[str] = field(default_factory=Counter)
    dropped_items: list[dict[str, Any]] = field(default_factory=list)
    kept_by_domain: Counter[str] = field(default_factory=Counter)
    tools_without_schema: Counter[str] = field(default_factory=Counter)

    def to_manifest(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "options": {"keep_failed": self.keep_failed},
            "files": {"sft": SFT_FILE},
            "n_input": self.n_input,
            "n_kept": self.kept,
            "n_dropped": sum(self.dropped.values()),
            "dropped": {r: self.dropped.get(r, 0) for r in DROP_REASONS},
            "kept_by_domain": dict(sorted(self.kept_by_domain.items())),
            "tools_without_schema": dict(sorted(self.tools_without_schema.items())),
            "dropped_trajectories": self.dropped_items,
        }


# ------------------------------------------------------------------------------------------- reading


def _load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserError(f"{path}: could not be read as JSON: {exc}") from None


def list_trials(run: Path, run_index: int = 0) -> list[Candidate]:
    """The trials of the run directory ``run`` (its results.json, else its trial.json files).

    Raises:
        UserError: ``run`` is not a run directory.
    """
    if not run.is_dir():
        raise UserError(f"{run}: is not a directory (expected a run written by `ridgeline eval -o RUN`)")
    results = run / "results.json"
    out: list[Candidate] = []
    if results.is_file():
        data = _load_json(results)
        trials = data.get("trials") if isinstance(data, dict) else None
        if not isinstance(trials, list):
            raise UserError(f"{results}: has no 'trials' list (expected the results of `ridgeline eval`)")
        for rec in trials:
            if isinstance(rec, dict):
                rel = str(rec.get("trajectory") or "")
                out.append(Candidate(str(run), run_index, rec, run / rel if rel else run / "missing"))
        return out
    files = sorted(run.glob("trials/*/*/trial.json"))
    if not files:
        raise UserError(f"{run}: holds no results.json and no trials/*/*/trial.json (not a run directory)")
    for f in files:
        rec = _load_json(f)
        if isinstance(rec, dict):
            out.append(Candidate(str(run), run_index, rec, f.parent / "trajectory.json"))
    return out


# ------------------------------------------------------------------------------------------- checks


def _strings(value: Any, key: str = "") -> Iterable[tuple[str, str]]:
    if isinstance(value, str):
        yield key, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(v, str(k))
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v, key)


def _protected_path(path: str) -> bool:
    if posixpath.basename(path) in PROTECTED_FILES:
        return True
    return any(path == root or path.startswith(root + "/") for root in PROTECTED_ROOTS)


def protected_mentions(traj: Trajectory) -> list[str]:
    """What the trajectory's tool calls mention on the verifier's side (empty when nothing)."""
    workdir = str(traj.sandbox.get("workdir") or "/app")
    found: list[str] = []
    for step in traj.steps:
        for call in step.tool_calls:
            found.extend(m.group(0) for m in _MENTION.finditer(call.arguments))
            for key, value in _strings(call.parsed or {}):
                if ("path" in key or "file" in key) and value and "\n" not in value:
                    resolved = posixpath.normpath(posixpath.join(workdir, value))
                    if _protected_path(resolved):
                        found.append(resolved)
    return sorted(set(found))


def _canonical(value: Any) -> Any:
    if isinstance(value, str):
        return " ".join(value.split())
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    return value


def call_signature(traj: Trajectory) -> tuple[str, ...]:
    """The normalised sequence of tool calls that ran or were rejected (for duplicate detection);
    calls skipped because ``submit`` had already ended the episode do not count."""
    sig = []
    for step in traj.steps:
        for call in step.tool_calls:
            if call.valid is None:
                continue
            if call.parsed is not None:
                args = json.dumps(_canonical(call.parsed), sort_keys=True, separators=(",", ":"))
            else:
                args = " ".join(call.arguments.split())
            sig.append(f"{call.name}\x00{args}")
    return tuple(sig)


def drop_reason(traj: Trajectory, *, keep_failed: bool) -> tuple[str, str] | None:
    """The first reason (and a detail) to drop ``traj``, duplicates aside; None to keep it."""
    status = traj.status
    if status is Status.INFRA_FAIL:
        return "infra_fail", traj.error or ""
    if status is Status.AGENT_ERROR:
        return "agent_error", traj.error or ""
    mentions = protected_mentions(traj)
    if mentions:
        return "touched_protected", ", ".join(mentions)
    if status in TRUNCATED:
        return "truncated", str(status)
    if traj.compactions:
        return "truncated", f"{len(traj.compactions)} compaction(s)"
    if status is None:
        return "truncated", "the episode has no status (it never finished)"
    if not keep_failed and (traj.reward is None or traj.reward < 1.0):
        return "failed", f"reward {traj.reward}"
    return None


# ------------------------------------------------------------------------------------------- output


def _schemas(traj: Trajectory, report: FilterReport) -> list[dict[str, Any]]:
    from ridgeline.tools import default_toolset

    known = {s["function"]["name"]: s for s in default_toolset().schemas()}
    extra = traj.metadata.get("tool_schemas")
    if isinstance(extra, list):
        for s in extra:
            if isinstance(s, dict) and isinstance(s.get("function"), dict) and "name" in s["function"]:
                known[str(s["function"]["name"])] = s
    out = []
    for name in traj.tools:
        if name not in known:
            report.tools_without_schema[name] += 1
            out.append(
                {
                    "type": "function",
                    "function": {"name": name, "parameters": {"type": "object", "properties": {}}},
                }
            )
        else:
            out.append(known[name])
    return out


def sft_messages(traj: Trajectory) -> list[dict[str, Any]]:
    """Chat messages for training: calls that no tool message answers are left out."""
    messages = traj.to_openai_messages()
    answered = {m["tool_call_id"] for m in messages if m["role"] == "tool"}
    for m in messages:
        calls = m.get("tool_calls")
        if calls is None:
            continue
        kept = [c for c in calls if c["id"] in answered]
        if kept:
            m["tool_calls"] = kept
        else:
            del m["tool_calls"]
            m["content"] = m["content"] or ""
    return messages


def sft_record(traj: Trajectory, trajectory: str, report: FilterReport) -> dict[str, Any]:
    return {
        "messages": sft_messages(traj),
        "tools": _schemas(traj, report),
        "metadata": {
            "task": traj.task,
            "task_hash": traj.task_hash,
            "domain": traj.domain,
            "reward": traj.reward,
            "policy_digest": traj.policy_digest,
            "status": str(traj.status) if traj.status is not None else None,
            "trajectory": trajectory,
            "trajectory_id": traj.id,
        },
    }


def _prepare_out(out: Path, force: bool) -> None:
    if out.exists() and not out.is_dir():
        raise UserError(f"{out}: is a file; --out must be a new or empty directory")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise UserError(f"{out}: is not empty; choose a new --out or pass --force to overwrite its dataset")
    out.mkdir(parents=True, exist_ok=True)


def filter_runs(
    runs: Sequence[Path], out: Path, *, keep_failed: bool = False, force: bool = False
) -> FilterReport:
    """Filter the trajectories of ``runs`` into ``out/sft.jsonl`` and ``out/manifest.json``.

    Raises:
        UserError: no runs; a run is not a run directory; ``out`` is not empty and not ``force``.
    """
    if not runs:
        raise UserError("no runs given (expected one or more run directories written by `ridgeline eval`)")
    candidates = [c for i, run in enumerate(runs) for c in list_trials(run, i)]
    _prepare_out(out, force)
    report = FilterReport(runs=[str(r) for r in runs], keep_failed=keep_failed)
    report.n_input = len(candidates)
    seen: set[tuple[str, tuple[str, ...]]] = set()
    lines: list[str] = []
    for cand in sorted(candidates, key=lambda c: c.sort_key):
        label = str(cand.trajectory_path)
        reason: tuple[str, str] | None
        traj: Trajectory | None = None
        try:
            traj = Trajectory.load(cand.trajectory_path)
        except (OSError, UnicodeDecodeError, ValidationError, ValueError) as exc:
            reason = ("unreadable", f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
        else:
            reason = drop_reason(traj, keep_failed=keep_failed)
            if reason is None:
                key = (traj.task_hash or traj.task, call_signature(traj))
                if key in seen:
                    reason = ("duplicate", "same task hash and tool calls as an earlier trajectory")
                else:
                    seen.add(key)
        if reason is not None:
            report.dropped[reason[0]] += 1
            report.dropped_items.append(
                {
                    "trajectory": label,
                    "task": cand.record.get("task"),
                    "reason": reason[0],
                    "detail": reason[1][:300],
                }
            )
            continue
        assert traj is not None
        report.kept += 1
        report.kept_by_domain[traj.domain or "unknown"] += 1
        lines.append(json.dumps(sft_record(traj, label, report), ensure_ascii=False, sort_keys=True))
    (out / SFT_FILE).write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    (out / MANIFEST_FILE).write_text(json.dumps(report.to_manifest(), indent=2) + "\n", encoding="utf-8")
    return report


__all__ = [
    "DROP_REASONS",
    "FilterReport",
    "call_signature",
    "drop_reason",
    "filter_runs",
    "list_trials",
    "protected_mentions",
    "sft_messages",
    "sft_record",
]
