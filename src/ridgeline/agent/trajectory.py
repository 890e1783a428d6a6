"""The trajectory: the full record of one episode, as one JSON file, with two exports.

Steps form a flat list that maps one-to-one onto chat messages: ``system`` (the system prompt),
``user`` (the instruction, and the loop's reminders), ``assistant`` (one model call: text, tool calls,
usage, timings, token ids and log-probs) and ``tool`` (one observation per tool call: stdout, stderr,
exit code, truncation, error). Observations are recorded in full even when the live context was
compacted; :attr:`Trajectory.compactions` says what the model no longer saw, and from which step.

Exports:

* :meth:`Trajectory.to_openai_messages` — a chat-completions message list with ``tool_calls`` and
  ``tool`` messages, for supervised fine-tuning.
* :meth:`Trajectory.to_atif` — Harbor's Agent Trajectory Interchange Format. Field names follow the
  ATIF RFC (harbor-framework/harbor ``docs/rfcs/0001-trajectory-format.md``, v1.4, as described at
  https://harborframework.com/docs/trajectory-format): root ``schema_version``, ``session_id``,
  ``agent`` {``name``, ``version``, ``model_name``}, ``steps``, ``final_metrics``
  {``total_prompt_tokens``, ``total_completion_tokens``, ``total_cached_tokens``, ``total_cost_usd``,
  ``total_steps``}, ``extra``; each step has ``step_id`` (from 1), ``timestamp`` (ISO 8601),
  ``source`` ("system" | "user" | "agent"), ``message``, and for agent steps ``model_name``,
  ``reasoning_content``, ``tool_calls`` [{``tool_call_id``, ``function_name``, ``arguments``}],
  ``observation`` {``results``: [{``source_call_id``, ``content``}]} and ``metrics``
  {``prompt_tokens`` (all input tokens, cached included), ``completion_tokens``, ``cached_tokens``,
  ``cost_usd``, ``completion_token_ids``, ``prompt_token_ids``, ``logprobs``}. In ATIF an agent step
  holds the model's turn *and* the observations of its tool calls, so each Ridgeline ``assistant`` step
  is merged with the ``tool`` steps that answer it.
"""

from __future__ import annotations

import json
import os
import tempfile
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from ridgeline.agent.status import Status
from ridgeline.policies.base import Usage
from ridgeline.tools.base import Observation

#: Version of the Ridgeline trajectory JSON layout.
SCHEMA_VERSION = 1
ATIF_VERSION = "ATIF-v1.4"

StepKind = Literal["system", "user", "assistant", "tool"]


def utcnow() -> datetime:
    return datetime.now(UTC)


class RecordedToolCall(BaseModel):
    """A tool call as the model wrote it, and whether it was valid."""

    id: str
    name: str
    #: The raw JSON text the model produced.
    arguments: str
    parsed: dict[str, Any] | None = None
    #: True when the call ran; False when it was rejected (unknown tool, bad JSON, schema mismatch);
    #: None when it was skipped because an earlier call in the same turn ended the episode.
    valid: bool | None = None
    error: str | None = None


class ObservationRecord(BaseModel):
    """What a tool call produced (outputs are stored as the model saw them, truncation included)."""

    text: str
    stdout: str | None = None
    stderr: str | None = None
    exit_code: int | None = None
    timed_out: bool = False
    truncated: bool = False
    error: str | None = None

    @classmethod
    def from_observation(cls, obs: Observation) -> ObservationRecord:
        return cls(
            text=obs.text,
            stdout=obs.stdout,
            stderr=obs.stderr,
            exit_code=obs.exit_code,
            timed_out=obs.timed_out,
            truncated=obs.truncated,
            error=obs.error,
        )


class Step(BaseModel):
    """One message of the episode; fields that do not apply to a kind stay at their defaults."""

    index: int
    kind: StepKind
    content: str = ""
    timestamp: datetime = Field(default_factory=utcnow)
    #: For user steps written by the loop (reminders): why it was sent.
    note: str | None = None
    # -- assistant steps
    tool_calls: list[RecordedToolCall] = Field(default_factory=list)
    usage: Usage | None = None
    cost_usd: float = 0.0
    model: str | None = None
    finish_reason: str | None = None
    reasoning: str | None = None
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    prompt_token_ids: list[int] | None = None
    model_s: float | None = None
    # -- tool steps
    tool_call_id: str | None = None
    name: str | None = None
    observation: ObservationRecord | None = None
    tool_s: float | None = None


class Compaction(BaseModel):
    """Older observations replaced by a stub in the live context, before the model call at ``step``."""

    step: int
    elided: list[str]
    tokens_before: int
    tokens_after: int


class ToolStats(BaseModel):
    """Inputs of tool-call accuracy (valid calls / all calls) and of the invalid-output status."""

    calls: int = 0
    valid: int = 0
    invalid: int = 0
    text_only_replies: int = 0
    empty_replies: int = 0

    @property
    def accuracy(self) -> float | None:
        return self.valid / self.calls if self.calls else None


class Trajectory(BaseModel):
    """The full record of one episode. ``reward`` and ``rewards`` are filled in by the verifier."""

    schema_version: int = SCHEMA_VERSION
    id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    task: str
    task_hash: str | None = None
    task_path: str | None = None
    domain: str | None = None
    #: Short spec of the policy (``openai:gpt-4o``), its config (without secrets) and config digest.
    policy: str = ""
    policy_config: dict[str, Any] = Field(default_factory=dict)
    policy_digest: str | None = None
    sandbox: dict[str, Any] = Field(default_factory=dict)
    limits: dict[str, Any] = Field(default_factory=dict)
    tools: list[str] = Field(default_factory=list)
    #: None while the episode is running.
    status: Status | None = None
    reward: float | None = None
    rewards: dict[str, float] = Field(default_factory=dict)
    started_at: datetime = Field(default_factory=utcnow)
    wall_s: float = 0.0
    steps: list[Step] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    cost_usd: float = 0.0
    #: False when some model call had no known price (``cost_usd`` is then a lower bound).
    priced: bool = True
    answer: str | None = None
    error: str | None = None
    tool_stats: ToolStats = Field(default_factory=ToolStats)
    compactions: list[Compaction] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @property
    def n_model_calls(self) -> int:
        return sum(1 for s in self.steps if s.kind == "assistant")

    # ------------------------------------------------------------------------------------- storage

    def save(self, path: str | Path) -> Path:
        """Write the trajectory as JSON, atomically (a reader never sees half a file)."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(self.model_dump_json(indent=1))
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return target

    @classmethod
    def load(cls, path: str | Path) -> Trajectory:
        return cls.model_validate_json(Path(path).read_text(encoding="utf-8"))

    # ------------------------------------------------------------------------------------- exports

    def to_openai_messages(self) -> list[dict[str, Any]]:
        """The episode as chat-completions messages (full observations, not the compacted ones)."""
        out: list[dict[str, Any]] = []
        for s in self.steps:
            if s.kind in ("system", "user"):
                out.append({"role": s.kind, "content": s.content})
            elif s.kind == "assistant":
                msg: dict[str, Any] = {"role": "assistant", "content": s.content or None}
                if s.tool_calls:
                    msg["tool_calls"] = [
                        {
                            "id": c.id,
                            "type": "function",
                            "function": {"name": c.name, "arguments": c.arguments},
                        }
                        for c in s.tool_calls
                    ]
                elif msg["content"] is None:
                    msg["content"] = ""
                out.append(msg)
            else:
                text = s.observation.text if s.observation is not None else s.content
                out.append({"role": "tool", "tool_call_id": s.tool_call_id or "", "content": text})
        return out

    def to_atif(self, *, agent_name: str = "ridgeline", agent_version: str | None = None) -> dict[str, Any]:
        """The episode in Harbor's ATIF (see the module docstring for the field mapping)."""
        if agent_version is None:
            from ridgeline import __version__

            agent_version = __version__
        model_name = next((s.model for s in self.steps if s.model), None) or self.policy_config.get("model")
        steps: list[dict[str, Any]] = []
        current: dict[str, Any] | None = None
        for s in self.steps:
            ts = s.timestamp.isoformat().replace("+00:00", "Z")
            if s.kind == "tool":
                result = {
                    "source_call_id": s.tool_call_id,
                    "content": s.observation.text if s.observation is not None else s.content,
                }
                if current is None:  # an observation no agent step asked for: attach to a system step
                    current = {"step_id": len(steps) + 1, "timestamp": ts, "source": "system", "message": ""}
                    steps.append(current)
                current.setdefault("observation", {"results": []})["results"].append(result)
                continue
            if s.kind in ("system", "user"):
                current = None
                entry: dict[str, Any] = {"step_id": len(steps) + 1, "timestamp": ts, "source": s.kind}
                entry["message"] = s.content
                if s.note:
                    entry["extra"] = {"note": s.note}
                steps.append(entry)
                continue
            entry = {"step_id": len(steps) + 1, "timestamp": ts, "source": "agent", "message": s.content}
            if s.model:
                entry["model_name"] = s.model
            if s.reasoning:
                entry["reasoning_content"] = s.reasoning
            if s.tool_calls:
                entry["tool_calls"] = [
                    {"tool_call_id": c.id, "function_name": c.name, "arguments": c.parsed or {}}
                    for c in s.tool_calls
                ]
                raw = {c.id: c.arguments for c in s.tool_calls if c.parsed is None}
                if raw:  # arguments that were not a JSON object: ATIF needs an object, keep the text
                    entry["extra"] = {"raw_arguments": raw}
            metrics: dict[str, Any] = {}
            if s.usage is not None:
                metrics.update(
                    prompt_tokens=s.usage.prompt_tokens,
                    completion_tokens=s.usage.completion_tokens,
                    cached_tokens=s.usage.cached_tokens,
                )
                if s.usage.estimated:
                    metrics["extra"] = {"estimated": True}
            metrics["cost_usd"] = s.cost_usd
            if s.prompt_token_ids is not None:
                metrics["prompt_token_ids"] = s.prompt_token_ids
            if s.token_ids is not None:
                metrics["completion_token_ids"] = s.token_ids
            if s.logprobs is not None:
                metrics["logprobs"] = s.logprobs
            entry["metrics"] = metrics
            steps.append(entry)
            current = entry
        agent: dict[str, Any] = {"name": agent_name, "version": agent_version}
        if model_name:
            agent["model_name"] = model_name
        agent["extra"] = {"policy": self.policy, "policy_digest": self.policy_digest}
        return {
            "schema_version": ATIF_VERSION,
            "session_id": self.id,
            "agent": agent,
            "steps": steps,
            "final_metrics": {
                "total_prompt_tokens": self.usage.prompt_tokens,
                "total_completion_tokens": self.usage.completion_tokens,
                "total_cached_tokens": self.usage.cached_tokens,
                "total_cost_usd": self.cost_usd,
                "total_steps": len(steps),
            },
            "extra": {
                "task": self.task,
                "task_hash": self.task_hash,
                "status": str(self.status) if self.status is not None else None,
                "reward": self.reward,
                "answer": self.answer,
                "error": self.error,
                "tool_call_accuracy": self.tool_stats.accuracy,
            },
        }

    def save_atif(self, path: str | Path) -> Path:
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(self.to_atif(), indent=1), encoding="utf-8")
        return target
