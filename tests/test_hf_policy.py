"""The ``hf`` policy: spec, digest, exact traces across turns and compaction, and the real agent loop."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from ridgeline.agent import AgentLimits, Status, run_agent
from ridgeline.errors import ConfigError
from ridgeline.policies import build_policy, parse_policy_spec
from ridgeline.policies.chat import render_messages
from ridgeline.policies.engine import Engine
from ridgeline.policies.hf import HFConfig, HFPolicy
from ridgeline.sandbox.base import Sandbox
from ridgeline.tools import default_toolset
from ridgeline.train import tiny

TOOLS = default_toolset().schemas()
START = [
    {"role": "system", "content": "You are an agent."},
    {"role": "user", "content": "Say hello with bash, then submit."},
]


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny.make_random_checkpoint(tmp_path_factory.mktemp("hf"), seed=1)


def _policy(ckpt: Path, **kw: Any) -> HFPolicy:
    config = HFConfig(path=ckpt, device="cpu", max_new_tokens=kw.pop("max_new_tokens", 16), seed=0, **kw)
    policy = build_policy(config)
    assert isinstance(policy, HFPolicy)
    policy.start(None, None)
    return policy


def test_spec_digest_and_label(ckpt: Path, tmp_path: Path) -> None:
    config = parse_policy_spec(f"hf:{ckpt}")
    assert isinstance(config, HFConfig) and config.path == ckpt and config.label() == f"hf:{ckpt}"
    assert config.digest() == HFConfig(path=ckpt).digest()
    assert config.digest() != HFConfig(path=ckpt, temperature=0.5).digest()
    assert "path" not in config._digest_payload() and "checkpoint" in config._digest_payload()
    # A copy of the checkpoint keeps the digest; a retrained one (other weights, same sizes) changes it.
    copy = tmp_path / "copy"
    copy.mkdir()
    for f in ckpt.iterdir():
        (copy / f.name).write_bytes(f.read_bytes())
    assert HFConfig(path=copy).digest() == config.digest()
    other = tiny.make_random_checkpoint(tmp_path / "other", seed=2)
    assert (other / "model.safetensors").stat().st_size == (ckpt / "model.safetensors").stat().st_size
    assert HFConfig(path=other).digest() != config.digest()


def test_bad_specs_are_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="needs a checkpoint folder"):
        parse_policy_spec("hf")
    with pytest.raises(ConfigError, match=r"no config\.json"):
        parse_policy_spec(f"hf:{tmp_path}")
    with pytest.raises(ConfigError, match="does not exist"):
        build_policy(HFConfig(path=tmp_path / "nope"))


def test_toml_config_resolves_the_path(ckpt: Path, tmp_path: Path) -> None:
    toml = tmp_path / "p.toml"
    rel = os.path.relpath(ckpt, tmp_path)
    toml.write_text(f'type = "hf"\npath = "{rel}"\ntemperature = 0.0\n')
    config = parse_policy_spec(str(toml))
    assert (
        isinstance(config, HFConfig) and config.path.resolve() == ckpt.resolve() and config.temperature == 0
    )


def test_turns_extend_one_exact_trace(ckpt: Path) -> None:
    policy = _policy(ckpt)
    messages = list(START)
    outputs = []
    for i in range(3):
        out = policy.act(messages, TOOLS)
        outputs.append(out)
        assert policy.trace is not None
        assert out.usage is not None and out.usage.completion_tokens == len(out.token_ids or [])
        assert out.prompt_token_ids is not None and out.usage.prompt_tokens == len(out.prompt_token_ids)
        assert out.logprobs is not None and len(out.logprobs) == len(out.token_ids or [])
        messages = [*messages, out.to_message(), {"role": "user", "content": f"observation {i}"}]
    trace = policy.trace
    assert trace is not None and policy.restarts == 0
    # Every turn's prompt is a prefix of the trace, and its generated ids follow it verbatim.
    for out in outputs:
        assert out.prompt_token_ids is not None and out.token_ids is not None
        n = len(out.prompt_token_ids)
        assert trace.token_ids[:n] == out.prompt_token_ids
        assert trace.token_ids[n : n + len(out.token_ids)] == out.token_ids
        assert trace.loss_mask[n : n + len(out.token_ids)] == [1] * len(out.token_ids)
    engine = policy.engine
    assert outputs[0].prompt_token_ids == engine.encode(
        render_messages(START, TOOLS, add_generation_prompt=True)
    )


def test_compaction_restarts_the_trace_from_the_rewritten_messages(ckpt: Path) -> None:
    policy = _policy(ckpt)
    out = policy.act(START, TOOLS)
    messages = [
        *START,
        out.to_message(),
        {"role": "tool", "tool_call_id": "c", "content": "long output " * 20},
    ]
    policy.act(messages, TOOLS)
    compacted = [*messages[:3], {**messages[3], "content": "[elided]"}]
    out3 = policy.act(compacted, TOOLS)
    assert policy.restarts == 1
    assert out3.prompt_token_ids is not None
    assert policy.engine.decode(out3.prompt_token_ids).endswith(
        "<|im_start|>tool\n[elided]<|im_end|>\n<|im_start|>assistant\n"
    )


def test_concurrent_episodes_share_one_engine_and_batch(ckpt: Path) -> None:
    policies = [_policy(ckpt) for _ in range(4)]
    engines = {id(p.engine) for p in policies}
    assert len(engines) == 1
    calls: list[int] = []
    engine: Engine = policies[0].engine
    original = engine.generate

    def spy(traces: Any, **kw: Any) -> Any:
        calls.append(len(traces))
        return original(traces, **kw)

    engine.generate = spy  # type: ignore[method-assign]
    barrier = threading.Barrier(4)
    results: list[Any] = [None] * 4

    def run(i: int) -> None:
        barrier.wait()
        results[i] = policies[i].act(START, TOOLS)

    try:
        threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        del engine.generate
    assert all(r is not None and r.token_ids for r in results)
    assert sum(calls) == 4 and len(calls) <= 4


def test_episode_in_a_real_sandbox_records_tokens(ckpt: Path, sb: Sandbox) -> None:
    config = HFConfig(path=ckpt, device="cpu", max_new_tokens=24, seed=0)
    policy = build_policy(config)
    try:
        result = run_agent(
            "Print hello.",
            sb,
            policy,
            limits=AgentLimits(max_steps=3, max_invalid_turns=5),
            policy_config=config,
        )
    finally:
        policy.close()
    assert result.status in {Status.STEP_LIMIT, Status.INVALID_OUTPUT, Status.OK}, result.trajectory.error
    steps = [s for s in result.trajectory.steps if s.kind == "assistant"]
    assert steps
    for s in steps:
        assert s.token_ids and s.logprobs and len(s.token_ids) == len(s.logprobs)
        assert s.usage is not None and not s.usage.estimated and s.usage.completion_tokens == len(s.token_ids)
    assert result.trajectory.policy_digest == config.digest()
