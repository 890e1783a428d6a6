"""Policies: anything that picks the next action, behind one interface and one spec syntax.

Built-in types: ``openai``, ``mock``, ``nop``, ``replay``, ``callable`` (and ``oracle``, registered by
the trial runner). See :mod:`ridgeline.policies.spec` for the spec syntax and the registry.
"""

from ridgeline.policies.base import (
    BasePolicy,
    ContextLengthExceeded,
    Message,
    Policy,
    PolicyDeadlineExceeded,
    PolicyOutput,
    ToolCall,
    ToolSchema,
    Usage,
)
from ridgeline.policies.mock import MockPolicy, call, turn
from ridgeline.policies.pricing import ModelPrice, cost_usd, price_for, register_price
from ridgeline.policies.simple import CallablePolicy, NopPolicy, ReplayPolicy, as_policy
from ridgeline.policies.spec import (
    CallableConfig,
    MockConfig,
    NopConfig,
    OpenAIConfig,
    PolicyConfig,
    ReplayConfig,
    ScriptedCall,
    ScriptedTurn,
    build_policy,
    config_from_dict,
    load_policy_toml,
    parse_policy_spec,
    register_policy,
    registered_policy_types,
)

__all__ = [
    "BasePolicy",
    "CallableConfig",
    "CallablePolicy",
    "ContextLengthExceeded",
    "Message",
    "MockConfig",
    "MockPolicy",
    "ModelPrice",
    "NopConfig",
    "NopPolicy",
    "OpenAIConfig",
    "Policy",
    "PolicyConfig",
    "PolicyDeadlineExceeded",
    "PolicyOutput",
    "ReplayConfig",
    "ReplayPolicy",
    "ScriptedCall",
    "ScriptedTurn",
    "ToolCall",
    "ToolSchema",
    "Usage",
    "as_policy",
    "build_policy",
    "call",
    "config_from_dict",
    "cost_usd",
    "load_policy_toml",
    "parse_policy_spec",
    "price_for",
    "register_policy",
    "register_price",
    "registered_policy_types",
    "turn",
]
