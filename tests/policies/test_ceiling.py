"""The ceiling: refuse, never clamp; every violation; secret args never shown."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from governor.policies.capability import Capability, CapabilityError
from governor.policies.ceiling import (
    AgentArgsForbidden,
    AgentForbidden,
    CapabilityExceeded,
    Ceiling,
    KeepForbidden,
    NetworkForbidden,
    RunRequest,
    check,
    parse_ceiling,
)
from governor.policies.errors import ConfigError

capabilities = st.sampled_from(list(Capability))
agents = st.sampled_from(["claude", "codex", "gemini", "demo", "acp"])
secret_args = st.lists(
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_=", min_size=12, max_size=40),
    max_size=4,
)
requests = st.builds(
    RunRequest,
    agent=agents,
    capability=capabilities,
    agent_args=secret_args.map(tuple),
    network=st.booleans(),
)
ceilings = st.builds(
    Ceiling,
    max_capability=capabilities,
    allowed_agents=st.lists(agents, unique=True).map(tuple),
    allow_agent_args=st.booleans(),
    allow_network=st.booleans(),
)


def test_capabilities_are_ordered_by_authority() -> None:
    assert Capability.READ_ONLY < Capability.EDIT_WORKSPACE < Capability.FULL_ACCESS


@pytest.mark.parametrize("name", ["read-only", "edit-workspace", "full-access"])
def test_a_capability_parses_and_renders_exactly(name: str) -> None:
    assert str(Capability.parse(name)) == name


@pytest.mark.parametrize("name", ["Read-Only", "read_only", "READ-ONLY", "full", ""])
def test_a_misspelled_capability_is_an_error_naming_the_accepted_spellings(name: str) -> None:
    with pytest.raises(CapabilityError) as e:
        Capability.parse(name)
    assert "read-only, edit-workspace, full-access" in str(e.value)


@given(requests, ceilings)
def test_a_checked_request_never_carries_more_authority_than_its_ceiling(
    request: RunRequest, ceiling: Ceiling
) -> None:
    result = check(request, ceiling)
    if isinstance(result, RunRequest):
        assert result is request  # unchanged, never clamped
        assert result.capability <= ceiling.max_capability
        assert result.agent in ceiling.allowed_agents
        assert ceiling.allow_agent_args or not result.agent_args
        assert ceiling.allow_network or not result.network


@given(requests, ceilings)
def test_every_violation_is_listed(request: RunRequest, ceiling: Ceiling) -> None:
    result = check(request, ceiling)
    expected = {
        AgentForbidden: request.agent not in ceiling.allowed_agents,
        CapabilityExceeded: request.capability > ceiling.max_capability,
        AgentArgsForbidden: bool(request.agent_args) and not ceiling.allow_agent_args,
        NetworkForbidden: request.network and not ceiling.allow_network,
    }
    found = {type(v) for v in result} if isinstance(result, list) else set()
    assert found == {kind for kind, hit in expected.items() if hit}


@given(requests, ceilings)
def test_raw_arg_values_never_appear_in_any_rendered_message(
    request: RunRequest, ceiling: Ceiling
) -> None:
    result = check(request, ceiling)
    if isinstance(result, list):
        rendered = "\n".join([str(v) for v in result] + [repr(v) for v in result])
        for arg in request.agent_args:
            assert arg not in rendered


def test_a_raw_args_violation_says_how_many() -> None:
    result = check(
        RunRequest("claude", agent_args=("--api-key=sk-live-1234567890", "--yolo")),
        Ceiling(allowed_agents=("claude",)),
    )
    assert isinstance(result, list)
    assert str(result[0]).startswith("raw agent arguments are not permitted; 2 requested")


def test_the_capability_violation_names_requested_then_permitted() -> None:
    result = check(
        RunRequest("claude", Capability.FULL_ACCESS), Ceiling(allowed_agents=("claude",))
    )
    assert [str(v) for v in result] == [
        "requested capability full-access exceeds the permitted maximum edit-workspace"
    ]


def test_an_empty_agent_list_permits_no_agent() -> None:
    result = check(RunRequest("claude"), Ceiling(allowed_agents=()))
    assert [str(v) for v in result] == ["agent claude is not permitted; permitted agents: none"]


def test_the_default_ceiling_is_edit_workspace_without_args_or_network() -> None:
    c = Ceiling.default(["claude", "acp"])
    assert (c.max_capability, c.allow_agent_args, c.allow_network) == (
        Capability.EDIT_WORKSPACE,
        False,
        False,
    )
    assert check(RunRequest("claude", Capability.EDIT_WORKSPACE), c) == RunRequest(
        "claude", Capability.EDIT_WORKSPACE
    )


def test_a_ceiling_file_is_parsed_strictly() -> None:
    c = parse_ceiling(
        'max_capability = "read-only"\nallowed_agents = ["codex"]\nallow_network = true\n'
        'protected = ["specs/**"]\n',
        "ops.toml",
    )
    assert c.max_capability is Capability.READ_ONLY
    assert c.allowed_agents == ("codex",)
    assert c.allow_network and not c.allow_agent_args
    assert c.protected == ("specs/**",)
    assert c.keep_within == ()
    assert parse_ceiling('keep_within = ["~/tools"]\n').keep_within == ("~/tools",)


def test_a_folder_to_keep_must_lie_within_what_the_ceiling_names() -> None:
    ceiling = Ceiling(allowed_agents=("acp",), keep_within=("~/tools", "/opt"))
    fits = RunRequest("acp", keep=("~/tools", "~/tools/go", "/opt/sdk"))
    assert check(fits, ceiling) == fits
    over = RunRequest("acp", keep=("~/toolsx", "~/tools/../.ssh", "/opt/sdk", "~/.config"))
    assert check(over, ceiling) == [
        KeepForbidden("~/toolsx", ("~/tools", "/opt")),
        KeepForbidden("~/tools/../.ssh", ("~/tools", "/opt")),
        KeepForbidden("~/.config", ("~/tools", "/opt")),
    ]
    refused = check(RunRequest("acp", keep=("~/tools",)), Ceiling.default(["acp"]))
    assert [str(v) for v in refused] == [  # type: ignore[union-attr]
        "keeping ~/tools visible is not permitted; permitted within: none (keep_within is empty)"
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            'max_capabilty = "read-only"\n',
            "ops.toml: max_capabilty: unknown key; did you mean `max_capability`?",
        ),
        (
            'max_capability = "Read-Only"\n',
            "ops.toml: max_capability: unknown capability 'Read-Only'; accepted: read-only",
        ),
        ("allow_network = 1\n", "ops.toml: allow_network: expected true or false, got an integer"),
        (
            'allowed_agents = "claude"\n',
            "ops.toml: allowed_agents: expected an array of strings, got a string",
        ),
        ("max_capability = \n", "ops.toml: line 1: max_capability: not valid TOML: Invalid value"),
    ],
)
def test_a_bad_ceiling_file_names_the_file_and_the_key(text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_ceiling(text, "ops.toml")
    assert str(e.value).startswith(expected)
