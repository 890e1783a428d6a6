"""Tools: schemas, argument validation before execution, truncation, file edits, submit."""

from __future__ import annotations

import json
import stat
import time
from collections.abc import Iterator

import pytest

from _fakes import DirSandbox
from ridgeline.errors import SandboxError, ToolError
from ridgeline.tools import (
    FunctionTool,
    Observation,
    ToolArgs,
    ToolContext,
    Toolset,
    default_toolset,
    truncate_middle,
)
from ridgeline.tools.builtin import BashTool


@pytest.fixture
def dsb() -> Iterator[DirSandbox]:
    sb = DirSandbox.create()
    yield sb
    sb.close()


@pytest.fixture
def ctx(dsb: DirSandbox) -> ToolContext:
    return ToolContext(sandbox=dsb)


def _walk_keys(node: object) -> Iterator[str]:
    if isinstance(node, dict):
        for k, v in node.items():
            yield k
            yield from _walk_keys(v)
    elif isinstance(node, list):
        for v in node:
            yield from _walk_keys(v)


def test_builtin_schemas_are_openai_function_tools() -> None:
    schemas = default_toolset().schemas()
    assert [s["function"]["name"] for s in schemas] == [
        "bash",
        "read_file",
        "write_file",
        "edit_file",
        "submit",
    ]
    for s in schemas:
        assert s["type"] == "function"
        fn = s["function"]
        assert fn["description"]
        assert fn["parameters"]["type"] == "object"
        assert fn["parameters"]["additionalProperties"] is False
        assert "title" not in set(_walk_keys(fn["parameters"]))
        json.dumps(s)  # serialisable
    bash = schemas[0]["function"]["parameters"]
    assert bash["required"] == ["command"]
    assert set(bash["properties"]) == {"command", "timeout"}


class _TitleArgs(ToolArgs):
    title: str


def test_a_field_named_title_survives_the_schema_cleanup() -> None:
    tool = FunctionTool("named", "Has a title field.", _TitleArgs, lambda a, c: a.title)
    params = tool.schema()["function"]["parameters"]
    assert "title" in params["properties"]
    assert params["required"] == ["title"]


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        ("bash", "{}", "missing required argument 'command'"),
        ("bash", '{"command": "ls", "cwd": "/"}', "unexpected argument 'cwd'"),
        ("bash", '{"command": 5}', "argument 'command'"),
        ("bash", '{"command": "ls", "timeout": "10"}', "argument 'timeout'"),
        ("bash", '{"command": "ls"', "not valid JSON"),
        ("bash", '["ls"]', "must be a JSON object"),
        ("edit_file", '{"path": "a", "old_str": "", "new_str": "x"}', "argument 'old_str'"),
        ("nosuch", "{}", "unknown tool 'nosuch'; available tools: bash, read_file"),
    ],
)
def test_invalid_calls_become_error_observations_and_never_run(
    dsb: DirSandbox, ctx: ToolContext, name: str, arguments: str, expected: str
) -> None:
    outcome = default_toolset().call(name, arguments, ctx)
    assert outcome.valid is False
    assert outcome.observation.error is not None
    assert expected in outcome.observation.text
    assert outcome.observation.text.startswith("error: ")
    assert dsb.exec_calls == []


def test_validate_raises_tool_error() -> None:
    with pytest.raises(ToolError, match="missing required argument 'path'"):
        default_toolset().get("read_file").validate({})  # type: ignore[union-attr]


def test_bash_reports_exit_code_and_both_streams(ctx: ToolContext) -> None:
    out = default_toolset().call("bash", {"command": "echo out; echo err >&2; exit 3"}, ctx)
    assert out.valid
    obs = out.observation
    assert obs.exit_code == 3
    assert obs.stdout == "out\n"
    assert obs.stderr == "err\n"
    assert not obs.truncated and not obs.timed_out
    assert "exit code: 3" in obs.text and "stdout:\nout" in obs.text and "stderr:\nerr" in obs.text
    assert out.parsed == {"command": "echo out; echo err >&2; exit 3", "timeout": None}


def test_bash_keeps_head_and_tail_of_long_output(ctx: ToolContext) -> None:
    tool = BashTool(max_output_bytes=100)
    cmd = "printf 'HEAD'; head -c 5000 /dev/zero | tr '\\0' x; printf 'TAIL'"
    obs = tool.run(tool.validate({"command": cmd}), ctx)
    assert obs.truncated
    assert obs.stdout is not None
    assert obs.stdout.startswith("HEAD") and obs.stdout.endswith("TAIL")
    assert "[... 4908 bytes cut ...]" in obs.stdout  # 5008 bytes, 100 kept
    assert len(obs.stdout) < 200


def test_truncate_middle_is_exact_and_utf8_safe() -> None:
    assert truncate_middle("short", 10) == ("short", 0)
    text, cut = truncate_middle("a" * 50 + "b" * 50, 20)
    assert cut == 80
    assert text == "a" * 10 + "\n[... 80 bytes cut ...]\n" + "b" * 10
    text, cut = truncate_middle("é" * 100, 11)  # 200 bytes, cut falls inside characters
    assert text == "éé\n[... 190 bytes cut ...]\nééé"  # partial characters are dropped and counted


def test_bash_timeout_is_reported(ctx: ToolContext) -> None:
    obs = default_toolset().call("bash", {"command": "sleep 5", "timeout": 0.2}, ctx).observation
    assert obs.timed_out
    assert obs.exit_code == 124
    assert obs.text.startswith("timed out after 0.2 s")


def test_bash_timeout_is_capped_by_the_episode_deadline(dsb: DirSandbox) -> None:
    ctx = ToolContext(sandbox=dsb, deadline=time.monotonic() + 0.3)
    obs = default_toolset().call("bash", {"command": "sleep 5", "timeout": 100}, ctx).observation
    assert obs.timed_out


def test_bash_does_not_run_once_the_episode_time_is_up(dsb: DirSandbox) -> None:
    ctx = ToolContext(sandbox=dsb, deadline=time.monotonic() - 1)
    out = default_toolset().call("bash", {"command": "touch x"}, ctx)
    assert out.observation.error is not None and "time is up" in out.observation.error
    assert dsb.exec_calls == []


def test_write_then_read_file(dsb: DirSandbox, ctx: ToolContext) -> None:
    tools = default_toolset()
    assert tools.call("write_file", {"path": "sub/dir/f.txt", "content": "héllo\n"}, ctx).valid
    assert (dsb.workdir / "sub/dir/f.txt").read_text() == "héllo\n"
    obs = tools.call("read_file", {"path": "sub/dir/f.txt"}, ctx).observation
    assert obs.text == "héllo\n" and obs.error is None


def test_read_file_errors_are_observations(dsb: DirSandbox, ctx: ToolContext) -> None:
    tools = default_toolset()
    missing = tools.call("read_file", {"path": "nope.txt"}, ctx)
    assert missing.valid  # the call was well-formed; it failed
    assert missing.observation.error is not None and "no such file" in missing.observation.error
    (dsb.workdir / "blob.bin").write_bytes(b"\xff\xfe\x00\x01")
    binary = tools.call("read_file", {"path": "blob.bin"}, ctx).observation
    assert binary.error is not None and "not UTF-8" in binary.error


def test_edit_file_replaces_exactly_one_occurrence(dsb: DirSandbox, ctx: ToolContext) -> None:
    f = dsb.workdir / "run.sh"
    f.write_text("#!/bin/sh\necho one\necho two\n")
    f.chmod(0o755)
    obs = (
        default_toolset()
        .call("edit_file", {"path": "run.sh", "old_str": "one", "new_str": "ONE"}, ctx)
        .observation
    )
    assert obs.error is None and "line 2" in obs.text
    assert f.read_text() == "#!/bin/sh\necho ONE\necho two\n"
    assert stat.S_IMODE(f.stat().st_mode) == 0o755  # still executable


def test_edit_file_absent_string_fails_clearly(dsb: DirSandbox, ctx: ToolContext) -> None:
    f = dsb.workdir / "a.txt"
    f.write_text("alpha\n")
    obs = (
        default_toolset()
        .call("edit_file", {"path": "a.txt", "old_str": "beta", "new_str": "x"}, ctx)
        .observation
    )
    assert obs.error == "old_str was not found in a.txt; nothing was changed"
    assert f.read_text() == "alpha\n"


def test_edit_file_ambiguous_string_fails_clearly(dsb: DirSandbox, ctx: ToolContext) -> None:
    f = dsb.workdir / "a.txt"
    f.write_text("x = 1\nx = 1\nx = 1\n")
    obs = (
        default_toolset()
        .call("edit_file", {"path": "a.txt", "old_str": "x = 1", "new_str": "y"}, ctx)
        .observation
    )
    assert obs.error is not None and "occurs 3 times" in obs.error
    assert f.read_text() == "x = 1\nx = 1\nx = 1\n"


def test_submit_ends_with_optional_answer(ctx: ToolContext) -> None:
    tools = default_toolset()
    with_answer = tools.call("submit", {"answer": "42"}, ctx)
    assert with_answer.done and with_answer.observation.answer == "42"
    bare = tools.call("submit", "", ctx)
    assert bare.done and bare.observation.answer is None


def test_sandbox_failure_propagates(dsb: DirSandbox, ctx: ToolContext) -> None:
    dsb.fail_exec = "bwrap died"
    with pytest.raises(SandboxError, match="bwrap died"):
        default_toolset().call("bash", {"command": "true"}, ctx)


class _RenderArgs(ToolArgs):
    scene: str
    samples: int = 4


def test_tasks_can_add_their_own_tools(ctx: ToolContext) -> None:
    def render(args: _RenderArgs, c: ToolContext) -> Observation:
        if args.samples > 64:
            raise ToolError("at most 64 samples")
        return Observation(text=f"rendered {args.scene} with {args.samples} samples")

    tools = default_toolset().add(FunctionTool("render", "Render a scene.", _RenderArgs, render))
    assert tools.names[-1] == "render"
    assert tools.schemas()[-1]["function"]["parameters"]["required"] == ["scene"]
    assert tools.call("render", {"scene": "cube"}, ctx).observation.text == "rendered cube with 4 samples"
    too_many = tools.call("render", {"scene": "cube", "samples": 100}, ctx)
    assert too_many.valid and too_many.observation.error == "at most 64 samples"
    with pytest.raises(ValueError, match="already"):
        tools.add(FunctionTool("render", "again", _RenderArgs, render))
    assert len(Toolset(tools).remove("render")) == 5
