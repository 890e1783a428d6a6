"""The ``hf`` policy: a local Hugging Face causal LM, with exact token ids and log-probs.

Spec: ``hf:PATH`` (a checkpoint folder), or a TOML file::

    type = "hf"
    path = "ckpt/"
    temperature = 1.0
    max_new_tokens = 512

Each episode keeps one :class:`~ridgeline.policies.engine.TokenTrace`: the first :meth:`HFPolicy.act`
starts it from the messages, every later call appends only the messages added since the previous call
(the tool observations and reminders after the assistant turn this policy produced) and generates. So
``PolicyOutput.token_ids`` are exactly the sampled ids, and the prompt of each turn is the exact token
sequence of the episode so far (``prompt_token_ids``). Tool calls are parsed by
:func:`ridgeline.policies.chat.parse_assistant` and validated by the agent loop like any policy's.

Compaction. When the loop compacts the context (old observations replaced by stubs), the messages no
longer extend the ones this policy last saw; the trace then restarts from the rewritten messages, with
the earlier assistant turns re-rendered from their text (their token ids may then differ from what was
sampled: such a turn is exact only within the new trace's own generations). The policy counts these
restarts in :attr:`HFPolicy.restarts`.

One engine per checkpoint per process is shared by all ``hf`` policies with the same settings (an eval
run builds one policy per trial); concurrent ``act`` calls are batched into one ``generate`` call.

Usage: ``prompt_tokens`` is the trace length before generation, ``completion_tokens`` the number of
generated ids (including a generated end-of-turn token).
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Self

from pydantic import Field

from ridgeline.errors import ConfigError
from ridgeline.policies.base import (
    BasePolicy,
    Message,
    PolicyDeadlineExceeded,
    PolicyOutput,
    ToolSchema,
    Usage,
)
from ridgeline.policies.spec import PolicyConfig, register_policy

if TYPE_CHECKING:
    from ridgeline.policies.engine import Engine, Generation, TokenTrace
    from ridgeline.sandbox.base import Sandbox
    from ridgeline.tasks.loader import Task

#: Checkpoint files whose identity enters the digest.
_FINGERPRINT_SUFFIXES = (".json", ".safetensors", ".bin", ".model", ".txt", ".jinja")
_SAMPLE_BYTES = 1 << 20


class HFConfig(PolicyConfig):
    """A local Hugging Face checkpoint run by Ridgeline's engine.

    The digest leaves out ``path`` and ``device`` and adds a fingerprint of the checkpoint's files:
    for every config/tokenizer/weights file its name, size and the SHA-256 of its first, middle and
    last MiB (all of a small file). A retrained model therefore gets a new digest; a copied one keeps it.
    """

    type: Literal["hf"] = "hf"
    path: Path
    temperature: float = Field(default=1.0, ge=0)
    top_p: float = Field(default=1.0, gt=0, le=1)
    max_new_tokens: int = Field(default=512, gt=0)
    #: Seeds the episodes' samplers (with the task hash); None = fresh randomness per episode.
    seed: int | None = None
    device: str = "auto"
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    #: Record the full prompt token ids on every turn (large trajectories for long episodes).
    record_prompt_ids: bool = True

    digest_exclude: ClassVar[frozenset[str]] = frozenset({"path", "device", "record_prompt_ids"})

    @classmethod
    def from_spec_arg(cls, arg: str | None) -> Self:
        if not arg:
            raise ValueError("needs a checkpoint folder: hf:PATH")
        path = Path(arg)
        if not (path / "config.json").is_file():
            raise ValueError(f"{arg!r} is not a Hugging Face checkpoint folder (no config.json)")
        return cls(path=path)

    def resolve_paths(self, base: Path) -> Self:
        return self if self.path.is_absolute() else self.model_copy(update={"path": base / self.path})

    def label(self) -> str:
        return f"hf:{self.path}"

    def _digest_payload(self) -> dict[str, Any]:
        data = super()._digest_payload()
        data["checkpoint"] = checkpoint_fingerprint(self.path)
        return data


def checkpoint_fingerprint(path: Path) -> str:
    """``sha256:`` + 16 hex digits over the identity of a checkpoint's files (see :class:`HFConfig`)."""
    try:
        entries = sorted(
            (f.name, f.stat().st_size, f.stat().st_mtime_ns)
            for f in Path(path).iterdir()
            if f.is_file() and f.suffix in _FINGERPRINT_SUFFIXES
        )
    except OSError:
        return "missing"
    return _fingerprint(str(Path(path).resolve()), tuple(entries))


@lru_cache(maxsize=64)
def _fingerprint(path: str, entries: tuple[tuple[str, int, int], ...]) -> str:
    h = hashlib.sha256()
    for name, size, _ in entries:
        h.update(f"{name}\0{size}\0".encode())
        with open(os.path.join(path, name), "rb") as f:
            if size <= 3 * _SAMPLE_BYTES:
                h.update(f.read())
            else:
                for offset in (0, size // 2, size - _SAMPLE_BYTES):
                    f.seek(offset)
                    h.update(f.read(_SAMPLE_BYTES))
    return "sha256:" + h.hexdigest()[:16]


# ------------------------------------------------------------------------------------ shared engines


@dataclass
class _Request:
    trace: TokenTrace
    done: threading.Event = field(default_factory=threading.Event)
    result: Generation | None = None
    error: BaseException | None = None


class _SharedEngine:
    """One engine per checkpoint and settings; batches concurrent requests with the same parameters.

    A caller queues its request, then takes the generation lock; whoever holds it runs every queued
    request in one batch, so callers that arrive while a batch runs are served together in the next.
    """

    def __init__(self, engine: Engine, fingerprint: str = "") -> None:
        self.engine = engine
        self.fingerprint = fingerprint
        self._queue: list[tuple[_Request, tuple[int, float, float]]] = []
        self._queue_lock = threading.Lock()
        self._gen_lock = threading.Lock()

    def generate(
        self, trace: TokenTrace, *, max_new_tokens: int, temperature: float, top_p: float
    ) -> Generation:
        params = (max_new_tokens, temperature, top_p)
        req = _Request(trace)
        with self._queue_lock:
            self._queue.append((req, params))
        with self._gen_lock:
            if not req.done.is_set():
                with self._queue_lock:
                    batch = [r for r, p in self._queue if p == params]
                    self._queue = [(r, p) for r, p in self._queue if p != params]
                try:
                    gens = self.engine.generate(
                        [r.trace for r in batch],
                        max_new_tokens=max_new_tokens,
                        temperature=temperature,
                        top_p=top_p,
                    )
                except BaseException as exc:  # handed to every waiter, re-raised below
                    for r in batch:
                        r.error = exc
                        r.done.set()
                else:
                    for r, g in zip(batch, gens, strict=True):
                        r.result = g
                        r.done.set()
        req.done.wait()
        if req.error is not None:
            raise req.error
        assert req.result is not None
        return req.result


_engines: dict[tuple[str, str, str], _SharedEngine] = {}
_engines_lock = threading.Lock()


def shared_engine(config: HFConfig) -> _SharedEngine:
    """The process-wide engine for ``config``'s checkpoint, device and dtype (loaded on first use)."""
    from ridgeline.policies.engine import Engine

    key = (str(config.path.resolve()), config.device, config.dtype)
    fingerprint = checkpoint_fingerprint(config.path)
    with _engines_lock:
        shared = _engines.get(key)
        if shared is None or shared.fingerprint != fingerprint:  # a retrained checkpoint is reloaded
            shared = _SharedEngine(Engine(config.path, device=config.device, dtype=config.dtype), fingerprint)
            _engines[key] = shared
        return shared


# ----------------------------------------------------------------------------------------- policy

_episode_counts: dict[tuple[int, str], int] = {}
_episode_lock = threading.Lock()


def _episode_seed(seed: int | None, task: Task | None) -> int:
    if seed is None:
        return int.from_bytes(os.urandom(8), "little") >> 1
    key = (seed, task.hash if task is not None else "adhoc")
    with _episode_lock:
        n = _episode_counts.get(key, 0)
        _episode_counts[key] = n + 1
    digest = hashlib.sha256(f"{seed}\0{key[1]}\0{n}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


class HFPolicy(BasePolicy):
    """Runs an :class:`~ridgeline.policies.engine.Engine` as an agent-loop policy (see the module docstring).

    Build one per episode (the trace is per-episode state); the engine behind it is shared.
    """

    def __init__(self, config: HFConfig, *, engine: Engine | None = None) -> None:
        self.config = config
        self._shared = _SharedEngine(engine) if engine is not None else None
        self.trace: TokenTrace | None = None
        self._seen: list[Message] = []
        self._seed: int | None = None
        self._rng: Any = None
        self._broken = False
        #: How often the trace was rebuilt because the messages no longer extended it (compaction).
        self.restarts = 0

    @property
    def engine(self) -> Engine:
        return self._engine().engine

    def _engine(self) -> _SharedEngine:
        if self._shared is None:
            self._shared = shared_engine(self.config)
        return self._shared

    def start(self, task: Task | None, sandbox: Sandbox | None) -> None:
        self.trace = None
        self._seen = []
        self._seed = _episode_seed(self.config.seed, task)
        self._rng = None
        self._broken = False

    def _sync(self, messages: list[Message], tools: Sequence[ToolSchema]) -> None:
        """Bring the trace up to ``messages``: start it, append the new messages, or restart it."""
        engine = self._engine().engine
        n = len(self._seen)
        if (
            self.trace is not None
            and len(messages) > n
            and messages[:n] == self._seen
            and messages[n].get("role") == "assistant"
        ):
            engine.append(self.trace, messages[n + 1 :])
            return
        if self.trace is not None or self._broken:
            self.restarts += 1
        if self._rng is None:
            from ridgeline.policies.engine import new_generator

            seed = self._seed if self._seed is not None else _episode_seed(self.config.seed, None)
            self._rng = new_generator(engine.device, seed)
        self.trace = engine.encode_conversation(messages, list(tools))
        self.trace.rng = self._rng
        if messages and messages[-1].get("role") == "assistant":
            engine.append(self.trace, [])
        self._broken = False

    def act(
        self, messages: Sequence[Message], tools: Sequence[ToolSchema], *, deadline: float | None = None
    ) -> PolicyOutput:
        if deadline is not None and time.monotonic() >= deadline:
            raise PolicyDeadlineExceeded("the episode deadline passed before the model was called")
        msgs = [dict(m) for m in messages]
        self._sync(msgs, tools)
        assert self.trace is not None
        prompt_len = len(self.trace.token_ids)
        prompt_ids = list(self.trace.token_ids) if self.config.record_prompt_ids else None
        c = self.config
        self._seen = msgs
        try:
            gen = self._engine().generate(
                self.trace, max_new_tokens=c.max_new_tokens, temperature=c.temperature, top_p=c.top_p
            )
        except BaseException:
            # The trace may hold a half-finished turn: rebuild it from the messages next time.
            self.trace, self._broken = None, True
            raise
        from ridgeline.policies.chat import parse_assistant

        text, calls = parse_assistant(gen.text)
        return PolicyOutput(
            text=text,
            tool_calls=calls,
            usage=Usage(prompt_tokens=prompt_len, completion_tokens=len(gen.token_ids)),
            token_ids=list(gen.token_ids),
            logprobs=list(gen.logprobs),
            prompt_token_ids=prompt_ids,
            cost_usd=0.0,
            priced=True,
            model=c.label(),
            finish_reason=gen.finish_reason,
        )


@register_policy("hf", HFConfig)
def build_hf(config: HFConfig) -> HFPolicy:
    """Build an ``hf`` policy (the engine loads on the first ``act``).

    Raises:
        ConfigError: the checkpoint folder does not exist.
    """
    if not config.path.is_dir():
        raise ConfigError(f"hf: checkpoint folder {str(config.path)!r} does not exist")
    return HFPolicy(config)


__all__ = ["HFConfig", "HFPolicy", "build_hf", "checkpoint_fingerprint", "shared_engine"]
