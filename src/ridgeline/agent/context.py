"""Context budget: how big the conversation is, and compaction when it would overflow.

Token counting. When the policy reports usage, the size of the context after a model call is exactly
``prompt_tokens + completion_tokens`` of that call; messages added since are estimated. Without
reported usage (or right after a compaction) the whole context is estimated. The estimate is
``ceil(characters / 4)`` over the JSON of the messages and tool schemas — the usual rule of thumb for
English text and code with BPE tokenizers; it errs high on plain ASCII prose and low on dense
non-Latin text, so leave headroom in the budget.

Compaction. When the estimate exceeds the budget, the oldest tool observations are replaced by a short
stub naming the tool and how much was elided. The system prompt, the instruction (the first user
message) and the ``keep_recent_turns`` most recent assistant turns with their observations are never
touched. Observations are elided oldest first until the context is at most ``target_ratio`` of the
budget (a low-water mark, so compaction does not run on every turn and a cached prefix stays stable);
if it cannot even get under the budget, the episode ends with ``context_overflow``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ridgeline.policies.base import Message, ToolSchema, Usage

CHARS_PER_TOKEN = 4
ELIDED_PREFIX = "[elided to fit the context budget"


def estimate_tokens(items: Sequence[Any]) -> int:
    """``ceil(len(json) / 4)`` of messages or tool schemas."""
    if not items:
        return 0
    return math.ceil(len(json.dumps(list(items), ensure_ascii=False)) / CHARS_PER_TOKEN)


def _content_len(msg: Message) -> int:
    content = msg.get("content")
    return len(content) if isinstance(content, str) else len(json.dumps(content, ensure_ascii=False))


@dataclass
class CompactionResult:
    elided: list[str]
    tokens_before: int
    tokens_after: int


@dataclass
class ContextTracker:
    """Keeps an estimate of the live context's size in tokens (see the module docstring)."""

    tools: Sequence[ToolSchema] = ()
    _anchor_n: int = 0
    _anchor_tokens: int | None = None
    _tools_tokens: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        self._tools_tokens = estimate_tokens(self.tools)

    def record_call(self, n_messages: int, usage: Usage | None) -> None:
        """After a model call: ``n_messages`` is the length of the conversation including the new
        assistant message; ``usage`` is what the policy reported (None or estimated: ignored)."""
        if usage is not None and not usage.estimated and usage.prompt_tokens > 0:
            self._anchor_n = n_messages
            self._anchor_tokens = usage.prompt_tokens + usage.completion_tokens

    def estimate(self, messages: Sequence[Message]) -> int:
        """Estimated prompt size of ``messages`` plus the tool schemas."""
        if self._anchor_tokens is not None and self._anchor_n <= len(messages):
            return self._anchor_tokens + estimate_tokens(messages[self._anchor_n :])
        return estimate_tokens(messages) + self._tools_tokens

    def compact(
        self,
        messages: list[Message],
        budget: int,
        *,
        keep_recent_turns: int = 3,
        target_ratio: float = 0.75,
    ) -> CompactionResult:
        """Replace old tool observations in ``messages`` (in place) by stubs until the estimate is at
        most ``target_ratio * budget``; returns what was elided. The caller checks the budget."""
        before = self.estimate(messages)
        tokens = before
        target = int(budget * target_ratio)
        protected_from = _recent_boundary(messages, keep_recent_turns)
        names = _tool_names(messages)
        elided: list[str] = []
        for i in range(protected_from):
            if tokens <= target:
                break
            msg = messages[i]
            if msg.get("role") != "tool":
                continue
            content = msg.get("content")
            if not isinstance(content, str) or content.startswith(ELIDED_PREFIX):
                continue
            call_id = str(msg.get("tool_call_id", ""))
            first = content.split("\n", 1)[0][:80]
            stub = (
                f"{ELIDED_PREFIX}: {len(content)} characters of {names.get(call_id, 'tool')} output; "
                f"it began: {first!r}]"
            )
            if len(stub) >= len(content):
                continue
            saved = math.floor((_content_len(msg) - len(stub)) / CHARS_PER_TOKEN)
            messages[i] = {**msg, "content": stub}
            tokens -= max(saved, 0)
            elided.append(call_id)
        if elided:
            # The anchor covered the original texts; re-anchor on the estimate after compaction.
            self._anchor_n, self._anchor_tokens = len(messages), tokens
        return CompactionResult(elided, before, tokens)


def _recent_boundary(messages: Sequence[Message], keep_recent_turns: int) -> int:
    """Index of the first message of the ``keep_recent_turns`` most recent assistant turns."""
    assistants = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
    if keep_recent_turns <= 0 or not assistants:
        return len(messages)
    if len(assistants) <= keep_recent_turns:
        return assistants[0]
    return assistants[-keep_recent_turns]


def _tool_names(messages: Sequence[Message]) -> dict[str, str]:
    names: dict[str, str] = {}
    for m in messages:
        for c in m.get("tool_calls") or []:
            fn = c.get("function") or {}
            names[str(c.get("id", ""))] = str(fn.get("name", "tool"))
    return names
