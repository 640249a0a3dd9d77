"""`[executor]`: an agent, an ACP argv, or a command; every malformed table named."""

from __future__ import annotations

import pytest

from governor.executor import (
    DEFAULT_TIMEOUT_SECS,
    Agent,
    Command,
    Executor,
    ExecutorError,
    Kind,
    for_agent,
    parse_executor,
)
from governor.presets import find, load_presets


def kind(text: str) -> Kind | None:
    e = parse_executor(text)
    return None if e is None else e.kind


def error(text: str) -> str:
    with pytest.raises(ExecutorError) as e:
        parse_executor(text)
    message = str(e.value)
    assert "\n" not in message
    return message


def test_an_executor_is_an_agent_an_acp_argv_or_a_command() -> None:
    assert kind("") is None
    assert kind("[other]\nx = 1\n") is None
    copilot = kind('[executor]\nagent = "copilot"\nmode = "x"\n')
    assert isinstance(copilot, Agent)
    assert (copilot.id, copilot.mode) == ("copilot", "x")
    assert copilot.preset == find("copilot") and copilot.argv == find("copilot").argv
    for agent_id in ["claude", "codex", "gemini", "opencode", "goose", "qwen", "demo"]:
        got = kind(f'[executor]\nagent = "{agent_id}"\n')
        assert isinstance(got, Agent) and got.name == agent_id, agent_id
    own = kind('[executor]\nkind = "acp"\nargv = ["my-agent", "--acp"]\n')
    assert isinstance(own, Agent)
    assert (own.id, own.argv, own.preset) == ("acp", ("my-agent", "--acp"), None)
    # kind = "acp" may also name a preset explicitly.
    explicit = kind('[executor]\nkind = "acp"\nagent = "gemini"\n')
    assert isinstance(explicit, Agent) and explicit.id == "gemini"
    command = kind('[executor]\nkind = "command"\nargv = ["x"]\n')
    assert command == Command(("x",)) and command.name == "command"
    error('[executor]\nkind = "command"\n')
    error('[executor]\nagent = "gpt"\n')
    error('[executor]\nagent = "copilot"\nargv = ["x"]\n')
    error('[executor]\nkind = "command"\nargv = ["x"]\nmode = "y"\n')
    error("[executor]\n")


def test_the_old_claude_and_codex_kinds_name_their_replacement() -> None:
    for old in ["claude", "codex"]:
        assert error(f'[executor]\nkind = "{old}"\n') == (
            f'[executor]: kind = "{old}" is now agent = "{old}" (it runs over ACP)'
        )


def test_one_run_can_take_another_agent() -> None:
    configured = parse_executor(
        '[executor]\nagent = "copilot"\nmodel = "m"\nmode = "plan"\ntimeout_secs = 60\n'
    )
    other = for_agent("opencode", configured)
    assert (other.kind.name, other.model, other.timeout_secs) == ("opencode", None, 60)
    assert isinstance(other.kind, Agent) and other.kind.mode is None
    same = for_agent("copilot", configured)
    assert same.model == "m"
    assert isinstance(same.kind, Agent) and same.kind.mode == "plan"
    assert for_agent("claude", None).timeout_secs == DEFAULT_TIMEOUT_SECS
    with pytest.raises(ExecutorError, match=r"^no agent `nope` \(claude, codex, "):
        for_agent("nope", None)


def test_a_command_executor_hands_no_mode_to_the_agent_it_is_swapped_for() -> None:
    configured = parse_executor('[executor]\nkind = "command"\nargv = ["x"]\ntimeout_secs = 5\n')
    e = for_agent("claude", configured)
    assert isinstance(e.kind, Agent) and e.kind.mode is None and e.timeout_secs == 5


def test_defaults_are_no_model_and_half_an_hour() -> None:
    e = parse_executor('[executor]\nagent = "claude"\n')
    assert e == Executor(kind=Agent("claude", find("claude").argv, None, find("claude")))
    assert e.model is None and e.timeout_secs == DEFAULT_TIMEOUT_SECS == 1800


def test_native_is_refused_because_there_is_no_loop_of_our_own() -> None:
    message = error('[executor]\nkind = "native"\n')
    assert message.startswith('[executor]: kind = "native" is not available')
    assert "no loop of its own" in message
    assert error('[executor]\nkind = "native"\nagent = "claude"\n') == message


def test_every_malformed_combination_gets_its_own_message() -> None:
    ids = ", ".join(load_presets())
    cases = {
        '[executor]\nkind = "command"\n': '[executor]: kind = "command" needs `argv`',
        '[executor]\nkind = "acp"\n': '[executor]: kind = "acp" needs `argv`',
        '[executor]\nkind = "acp"\nargv = [""]\n': '[executor]: kind = "acp" needs `argv`',
        '[executor]\nagent = "gpt"\n': f'[executor]: agent = "gpt" ({ids})',
        '[executor]\nagent = "copilot"\nargv = ["x"]\n': (
            "[executor]: `agent` and `argv` exclusive: an agent of your own is "
            'kind = "acp" with `argv`'
        ),
        '[executor]\nkind = "command"\nargv = ["x"]\nmode = "y"\n': (
            "[executor]: `mode` is an ACP agent's permission mode"
        ),
        "[executor]\n": (
            f'[executor]: say which agent: agent = "…" ({ids}), '
            'or kind = "acp" / "command" with `argv`'
        ),
        '[executor]\nargv = ["x"]\n': (
            f'[executor]: say which agent: agent = "…" ({ids}), '
            'or kind = "acp" / "command" with `argv`'
        ),
        '[executor]\nkind = "shell"\n': (
            '[executor]: kind = "shell" (acp or command; an agent is agent = "…")'
        ),
        '[executor]\nkind = "gemini"\n': (
            '[executor]: kind = "gemini" (acp or command; an agent is agent = "gemini")'
        ),
        '[executor]\nkind = "claude"\nagent = "claude"\n': (
            '[executor]: kind = "claude" (acp or command; an agent is agent = "claude")'
        ),
        '[executor]\nkind = "command"\nagent = "claude"\n': (
            '[executor]: kind = "command" runs `argv`, not an agent: drop `agent` or `kind`'
        ),
    }
    for text, expected in cases.items():
        assert error(text) == expected, text


def test_an_unknown_key_is_named_with_the_closest_one() -> None:
    assert error('[executor]\nagent = "claude"\nmodl = "m"\n') == (
        "[executor]: unknown key `modl` (did you mean `model`?)"
    )
    assert error('[executor]\nagent = "claude"\ntimeout = 5\n') == (
        "[executor]: unknown key `timeout` (did you mean `timeout_secs`?)"
    )
    message = error('[executor]\nagent = "claude"\nsandbox = true\n')
    assert message.startswith("[executor]: unknown key `sandbox` (known: kind, agent, argv")


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("agent = 3", "`agent` must be a string, not an integer"),
        ('kind = ["acp"]', "`kind` must be a string, not a list"),
        ('argv = "my-agent --acp"', "`argv` must be a list of strings, not a string"),
        ('argv = ["a", 1]', "`argv` must be a list of strings"),
        ("model = true", "`model` must be a string, not a boolean"),
        ("mode = {}", "`mode` must be a string, not a table"),
        ('timeout_secs = "60"', "`timeout_secs` must be an integer (seconds), not a string"),
        ("timeout_secs = true", "`timeout_secs` must be an integer (seconds), not a boolean"),
        ("timeout_secs = 1.5", "`timeout_secs` must be an integer (seconds), not a float"),
        ("timeout_secs = 0", "`timeout_secs` must be a positive number of seconds"),
        ("timeout_secs = -1", "`timeout_secs` must be a positive number of seconds"),
    ],
)
def test_a_wrong_type_names_the_key(line: str, expected: str) -> None:
    assert error(_with(line)) == f"[executor]: {expected}"


def _with(line: str) -> str:
    """An otherwise valid custom-agent table with `line` replacing its key."""
    key = line.split(" =")[0]
    base = {"kind": '"acp"', "argv": '["a"]'}
    base.pop(key, None)
    body = "".join(f"{k} = {v}\n" for k, v in base.items())
    return f"[executor]\n{body}{line}\n"


def test_bad_toml_and_a_non_table_executor_are_refused() -> None:
    assert error("[executor\n").startswith("invalid TOML: ")
    assert error('executor = "claude"\n') == "[executor] must be a table"


def test_a_preset_table_can_be_given() -> None:
    table = load_presets(
        '[mine]\nname = "M"\nargv = ["m"]\nlogin = "m"\nhome = []\ninstall = "i"\n'
    )
    e = parse_executor('[executor]\nagent = "mine"\n', table=table)
    assert e is not None and isinstance(e.kind, Agent) and e.kind.argv == ("m",)
    with pytest.raises(ExecutorError, match=r'agent = "claude" \(mine\)'):
        parse_executor('[executor]\nagent = "claude"\n', table=table)
    assert for_agent("mine", None, table=table).kind.name == "mine"
