"""Policies: spec parsing and its errors, config digests, the registry, mock/nop/replay/callable, prices."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from ridgeline.errors import ConfigError, PolicyError, UserError
from ridgeline.policies import (
    CallableConfig,
    MockConfig,
    MockPolicy,
    ModelPrice,
    NopConfig,
    OpenAIConfig,
    PolicyConfig,
    PolicyOutput,
    ReplayConfig,
    ToolCall,
    Usage,
    as_policy,
    build_policy,
    call,
    config_from_dict,
    cost_usd,
    parse_policy_spec,
    price_for,
    register_policy,
    turn,
)
from ridgeline.policies import spec as spec_mod

SCRIPT = [
    {"tool_calls": [{"name": "bash", "arguments": {"command": "ls"}}]},
    "thinking out loud",
    {"text": "done", "tool_calls": [{"name": "submit", "arguments": '{"answer": "7"}', "id": "c9"}]},
]


@pytest.fixture
def script(tmp_path: Path) -> Path:
    p = tmp_path / "script.json"
    p.write_text(json.dumps(SCRIPT))
    return p


@pytest.fixture
def registry_guard() -> Iterator[None]:
    saved = dict(spec_mod._registry)
    yield
    spec_mod._registry.clear()
    spec_mod._registry.update(saved)


# ------------------------------------------------------------------------------------------ parsing


def test_parse_every_short_form(script: Path) -> None:
    assert parse_policy_spec("nop") == NopConfig()
    assert parse_policy_spec(f"mock:{script}") == MockConfig(path=script)
    assert parse_policy_spec(f"replay:{script}") == ReplayConfig(path=script)
    assert parse_policy_spec("openai:gpt-4o") == OpenAIConfig(model="gpt-4o")
    at = parse_policy_spec("openai:Qwen/Qwen3-8B@http://127.0.0.1:8000/v1")
    assert isinstance(at, OpenAIConfig)
    assert (at.model, at.base_url) == ("Qwen/Qwen3-8B", "http://127.0.0.1:8000/v1")
    assert parse_policy_spec("openai:qwen2.5:7b") == OpenAIConfig(model="qwen2.5:7b")
    assert parse_policy_spec("callable:json:dumps") == CallableConfig(target="json:dumps")
    assert at.label() == "openai:Qwen/Qwen3-8B@http://127.0.0.1:8000/v1"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "empty policy spec; expected one of: oracle | nop | mock:FILE.json"),
        ("gpt4", "unknown policy spec 'gpt4'; expected one of: oracle | nop"),
        ("claude:sonnet", "unknown policy spec 'claude:sonnet'"),
        ("nop:x", "policy spec 'nop:x': nop takes no argument"),
        ("openai", "openai needs a model: openai:MODEL"),
        ("openai:", "openai needs a model"),
        ("openai:m@ftp://x", "must start with http:// or https://"),
        ("mock:/no/such.json", "script file '/no/such.json' does not exist"),
        ("mock", "needs a script file"),
        ("replay:/no/such.json", "trajectory file '/no/such.json' does not exist"),
        ("callable:not a target", "expected package.module:attribute"),
        ("missing.toml", "missing.toml: policy file does not exist"),
    ],
)
def test_bad_specs_fail_with_one_clear_user_error(spec: str, message: str) -> None:
    with pytest.raises(UserError) as info:
        parse_policy_spec(spec)
    assert message in str(info.value)


def test_unknown_spec_lists_all_valid_forms() -> None:
    with pytest.raises(ConfigError) as info:
        parse_policy_spec("bogus")
    text = str(info.value)
    for form in (
        "oracle",
        "nop",
        "mock:FILE.json",
        "replay:TRAJECTORY.json",
        "openai:MODEL",
        "openai:MODEL@http://HOST:PORT/v1",
        "callable:package.module:function",
        ".toml",
    ):
        assert form in text


def test_toml_file_with_relative_paths(tmp_path: Path, script: Path) -> None:
    (tmp_path / "p.toml").write_text('type = "mock"\npath = "script.json"\nloop = true\n')
    cfg = parse_policy_spec(str(tmp_path / "p.toml"))
    assert cfg == MockConfig(path=tmp_path / "script.json", loop=True)
    (tmp_path / "o.toml").write_text(
        'type = "openai"\nmodel = "my-model"\ntemperature = 0.2\napi_key = "sk-secret"\n'
        "[price]\ninput = 1.0\ncached_input = 0.1\noutput = 2.0\n"
    )
    o = parse_policy_spec(str(tmp_path / "o.toml"))
    assert isinstance(o, OpenAIConfig)
    assert o.temperature == 0.2 and o.price == ModelPrice(input=1.0, cached_input=0.1, output=2.0)
    assert o.api_key is not None and o.api_key.get_secret_value() == "sk-secret"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('model = "x"\n', "missing 'type'"),
        ('type = "gemini"\n', "unknown policy type 'gemini'"),
        ('type = "openai"\n', "model: Field required"),
        ('type = "openai"\nmodel = "m"\ntemprature = 1\n', "temprature: Extra inputs are not permitted"),
        ('type = "openai"\nmodel = "m"\nmax_tokens = 0\n', "max_tokens: Input should be greater than 0"),
        ("type = \n", "is not valid TOML"),
    ],
)
def test_bad_toml_names_file_and_field(tmp_path: Path, body: str, message: str) -> None:
    f = tmp_path / "bad.toml"
    f.write_text(body)
    with pytest.raises(ConfigError) as info:
        parse_policy_spec(str(f))
    assert str(f) in str(info.value) and message in str(info.value)


# ------------------------------------------------------------------------------------------ digests


def test_digest_is_stable_and_tracks_behaviour() -> None:
    a = OpenAIConfig(model="m", temperature=0.5)
    assert a.digest() == OpenAIConfig(temperature=0.5, model="m").digest()
    assert a.digest().startswith("sha256:") and len(a.digest()) == len("sha256:") + 16
    assert a.digest() != OpenAIConfig(model="m", temperature=0.7).digest()
    assert a.digest() != OpenAIConfig(model="m2", temperature=0.5).digest()
    # Where and how robustly the model is called does not change what it is.
    same = OpenAIConfig(model="m", temperature=0.5, base_url="http://h/v1", max_attempts=2, timeout_s=5)
    assert a.digest() == same.digest()


def test_secrets_never_leave_the_config() -> None:
    cfg = OpenAIConfig(model="m", api_key="sk-very-secret")  # type: ignore[arg-type]
    assert cfg.digest() == OpenAIConfig(model="m").digest()
    assert "sk-very-secret" not in json.dumps(cfg.public_dict())
    assert "sk-very-secret" not in cfg.model_dump_json()
    assert "sk-very-secret" not in repr(cfg)


def test_mock_digest_follows_the_script_content(script: Path) -> None:
    before = MockConfig(path=script).digest()
    script.write_text(json.dumps(SCRIPT[:1]))
    assert MockConfig(path=script).digest() != before


# ------------------------------------------------------------------------------------------ registry


def test_register_a_policy_type_by_decorator(registry_guard: None) -> None:
    @register_policy("testbare")
    def build(config: PolicyConfig) -> MockPolicy:
        return MockPolicy(["from the registry"])

    cfg = parse_policy_spec("testbare")
    assert cfg.type == "testbare" and cfg.label() == "testbare"
    assert config_from_dict({"type": "testbare"}) == cfg
    policy = build_policy(cfg)
    assert policy.act([], []).text == "from the registry"
    with pytest.raises(ConfigError, match="testbare takes no argument"):
        parse_policy_spec("testbare:x")
    with pytest.raises(ConfigError, match="testbare"):
        parse_policy_spec("bogus")  # registered types are listed among the valid forms


class _TempConfig(PolicyConfig):
    type: str = "testtemp"
    level: int = 1

    @classmethod
    def from_spec_arg(cls, arg: str | None) -> _TempConfig:
        return cls(level=int(arg or 1))


def test_register_a_policy_type_with_its_config(registry_guard: None) -> None:
    @register_policy("testtemp", _TempConfig)
    def build(config: _TempConfig) -> MockPolicy:
        return MockPolicy([f"level {config.level}"])

    assert build_policy("testtemp:3").act([], []).text == "level 3"
    with pytest.raises(ConfigError, match="level"):
        config_from_dict({"type": "testtemp", "level": "high"})


# ------------------------------------------------------------------------------------------ policies


def test_nop_submits_immediately() -> None:
    out = build_policy("nop").act([], [])
    assert [c.name for c in out.tool_calls] == ["submit"]
    assert out.tool_calls[0].parsed == {}


def test_mock_from_file_replays_script_and_rewinds(script: Path) -> None:
    policy = build_policy(f"mock:{script}")
    outs = [policy.act([], []) for _ in range(3)]
    assert outs[0].tool_calls[0].name == "bash" and outs[0].tool_calls[0].parsed == {"command": "ls"}
    assert outs[1].text == "thinking out loud" and not outs[1].tool_calls
    assert outs[2].tool_calls[0].id == "c9" and outs[2].tool_calls[0].parsed == {"answer": "7"}
    with pytest.raises(PolicyError, match="exhausted after 3 turns"):
        policy.act([], [])
    policy.start(None, None)
    assert policy.act([], []).tool_calls[0].name == "bash"


def test_mock_keeps_invalid_json_raw() -> None:
    policy = MockPolicy([turn(call("bash", '{"command": "ls"'))], loop=True)
    c = policy.act([], []).tool_calls[0]
    assert c.parsed is None and c.parse_error is not None and c.arguments == '{"command": "ls"'
    assert c.id  # ids are filled in
    assert policy.act([], []).tool_calls[0].arguments == '{"command": "ls"'  # loops


def test_mock_script_file_errors_are_clear(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('[{"tool_calls": [{"nam": "bash"}]}]')
    with pytest.raises(ConfigError, match=r"bad.json: turn 0: .*name"):
        build_policy(f"mock:{bad}")
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        build_policy(f"mock:{bad}")


def test_replay_reads_openai_messages_and_atif(tmp_path: Path) -> None:
    msgs = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "bash", "arguments": '{"command":"ls"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": "x"},
        {"role": "assistant", "content": "bye"},
    ]
    (tmp_path / "m.json").write_text(json.dumps(msgs))
    p = build_policy(f"replay:{tmp_path / 'm.json'}")
    assert p.act([], []).tool_calls[0].parsed == {"command": "ls"}
    assert p.act([], []).text == "bye"
    with pytest.raises(PolicyError, match="no more turns"):
        p.act([], [])
    atif = {
        "schema_version": "ATIF-v1.4",
        "steps": [
            {"step_id": 1, "source": "user", "message": "go"},
            {
                "step_id": 2,
                "source": "agent",
                "message": "",
                "tool_calls": [
                    {"tool_call_id": "t", "function_name": "submit", "arguments": {"answer": "1"}}
                ],
            },
        ],
    }
    (tmp_path / "a.json").write_text(json.dumps(atif))
    out = build_policy(f"replay:{tmp_path / 'a.json'}").act([], [])
    assert out.tool_calls[0].name == "submit" and out.tool_calls[0].parsed == {"answer": "1"}
    (tmp_path / "empty.json").write_text(json.dumps({"steps": []}))
    with pytest.raises(ConfigError, match="holds no assistant turns"):
        build_policy(f"replay:{tmp_path / 'empty.json'}")


def echo_policy(messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]) -> str:
    return f"{len(messages)} messages, {len(tools)} tools"


class CountingPolicy:
    """Only defines act(); start/close are supplied by as_policy."""

    def __init__(self, prefix: str = "n") -> None:
        self.prefix = prefix
        self.n = 0

    def act(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]],
        *,
        deadline: float | None = None,
    ) -> PolicyOutput:
        self.n += 1
        return PolicyOutput(text=f"{self.prefix}{self.n}")


def test_callable_spec_wraps_functions_and_classes() -> None:
    mod = sys.modules[__name__].__name__
    f = build_policy(f"callable:{mod}:echo_policy")
    assert f.act([{"role": "user", "content": "x"}], [{}, {}]).text == "1 messages, 2 tools"
    c = build_policy(CallableConfig(target=f"{mod}:CountingPolicy", kwargs={"prefix": "k"}))
    c.start(None, None)
    assert c.act([], []).text == "k1"
    c.close()
    with pytest.raises(ConfigError, match="cannot import"):
        build_policy("callable:no_such_module_xyz:fn")
    with pytest.raises(ConfigError, match="has no attribute 'nothing'"):
        build_policy(f"callable:{mod}:nothing")


def test_as_policy_adapts_python_objects() -> None:
    assert as_policy(lambda m, t: {"text": "hi", "tool_calls": [{"name": "submit"}]}).act([], []).tool_calls[
        0
    ].name == ("submit")
    assert as_policy(CountingPolicy()).act([], []).text == "n1"
    with pytest.raises(PolicyError, match="returned int"):
        as_policy(lambda m, t: 3).act([], [])
    with pytest.raises(ConfigError, match="is not a policy"):
        as_policy(42)


def test_tool_call_from_raw() -> None:
    assert ToolCall.from_raw("i", "f", None).parsed == {}
    assert ToolCall.from_raw("i", "f", "").parsed == {}
    assert ToolCall.from_raw("i", "f", "[1]").parse_error == "expected a JSON object, got list"
    assert ToolCall.from_raw("i", "f", {"a": 1}).arguments == '{"a": 1}'


# ------------------------------------------------------------------------------------------ pricing


def test_cost_uses_separate_cached_uncached_and_output_prices() -> None:
    usage = Usage(prompt_tokens=1_000_000, cached_tokens=400_000, completion_tokens=100_000)
    cost, priced = cost_usd("gpt-4o", usage)
    assert priced
    assert cost == pytest.approx(0.6 * 2.50 + 0.4 * 1.25 + 0.1 * 10.00)
    assert price_for("openai/GPT-4o-2024-08-06") == price_for("gpt-4o")
    assert price_for("gpt-4o-mini") != price_for("gpt-4o")
    assert cost_usd("my-local-model", usage) == (0.0, False)
    own = ModelPrice(input=1, cached_input=0, output=0)
    assert cost_usd("my-local-model", usage, own) == (pytest.approx(0.6), True)
