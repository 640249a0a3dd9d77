"""The ``[mcp]`` section of a policy and the engine's word on MCP calls."""

from __future__ import annotations

import pytest

from governor.policies.capability import Capability
from governor.policies.decide import decide
from governor.policies.errors import ConfigError
from governor.policies.mcp import McpCall, McpServer
from governor.policies.policy import parse_policy
from governor.policies.rules import Verdict

POLICY = """
capability = "edit-workspace"

[[mcp.servers]]
name = "git"
command = ["mcp-server-git", "--repository", "."]
env = ["GIT_AUTHOR_NAME"]

[[mcp.servers]]
name = "fs"
command = ["mcp-server-filesystem", "."]
writable = true
timeout = 30

[[mcp.servers]]
name = "docs"
url = "https://mcp.example.com/mcp"
headers = { Authorization = "DOCS_TOKEN", X-Team = "DOCS_TEAM" }

[mcp.deny]
tools = ["git.git_commit", { tool = "fs.read_*", args = { path = "*/.env" } }]
resources = ["fs.file:///etc/*"]

[mcp.ask]
tools = ["git.git_reset"]

[mcp.allow]
tools = ["git.git_*", "fs.*"]
"""


def bound(text: str = POLICY):
    return parse_policy(text, "job.toml").bind("/work/ws")


def verdict(call: McpCall, text: str = POLICY) -> tuple[Verdict, str]:
    d = decide(call, bound(text))
    return d.verdict, d.rule


def test_a_policy_names_its_servers_with_their_sandbox_settings() -> None:
    mcp = bound().mcp
    assert [s.name for s in mcp.servers] == ["git", "fs", "docs"]
    git, fs, docs = mcp.servers
    assert git.command == ("mcp-server-git", "--repository", ".") and git.env == ("GIT_AUTHOR_NAME",)
    assert not git.writable and git.timeout == 120.0 and git.stdio
    assert fs.writable and fs.timeout == 30.0
    assert docs.url == "https://mcp.example.com/mcp" and not docs.stdio
    assert docs.headers == (("Authorization", "DOCS_TOKEN"), ("X-Team", "DOCS_TEAM"))
    # connections of its origin may reach its own host and port, and nothing else
    assert [h.text for h in docs.hosts] == ["mcp.example.com:443"] and git.hosts == ()


def test_plain_http_is_accepted_for_a_loopback_host_only() -> None:
    for url in ("http://127.0.0.1:8080/mcp", "http://localhost/mcp", "http://[::1]:9/mcp"):
        server = parse_policy(f'[[mcp.servers]]\nname = "a"\nurl = "{url}"', "job.toml").mcp.servers[0]
        assert server.url == url
    with pytest.raises(ConfigError, match=r"loopback host only.*not mcp\.example\.com: use https://"):
        parse_policy('[[mcp.servers]]\nname = "a"\nurl = "http://mcp.example.com/mcp"', "job.toml")
    with pytest.raises(ValueError, match="loopback host only"):
        McpServer("a", url="http://10.0.0.1/mcp")
    assert McpServer("a", url="https://10.0.0.1/mcp").hosts[0].text == "10.0.0.1:443"


def test_a_header_value_written_in_place_of_its_variable_is_refused_and_not_echoed() -> None:
    text = '[[mcp.servers]]\nname = "a"\nurl = "https://h/mcp"\nheaders = { Authorization = "Bearer s3cr3t-v4lue" }'
    with pytest.raises(ConfigError) as caught:
        parse_policy(text, "job.toml")
    assert caught.value.key == "mcp.servers[0].headers.Authorization"
    assert "s3cr3t" not in str(caught.value) and "name of a variable" in str(caught.value)


def test_deny_beats_ask_beats_allow_over_server_dot_tool_patterns() -> None:
    assert verdict(McpCall("git", "tools/call", "git_commit")) == (
        Verdict.DENY, "mcp.deny: git.git_commit"
    )
    assert verdict(McpCall("git", "tools/call", "git_reset"))[0] is Verdict.ASK
    assert verdict(McpCall("git", "tools/call", "git_status")) == (
        Verdict.ALLOW, "mcp.allow: git.git_*"
    )


def test_an_argument_pattern_refuses_only_the_calls_whose_argument_matches() -> None:
    env = McpCall("fs", "tools/call", "read_text_file", {"path": "/work/ws/.env"})
    other = McpCall("fs", "tools/call", "read_text_file", {"path": "/work/ws/README.md"})
    assert verdict(env)[0] is Verdict.DENY
    assert verdict(other) == (Verdict.ALLOW, "mcp.allow: fs.*")
    # the argument missing: the argument rule does not match
    assert verdict(McpCall("fs", "tools/call", "read_text_file"))[0] is Verdict.ALLOW


def test_a_tool_no_rule_names_is_asked_below_full_access_and_allowed_at_full_access() -> None:
    text = '[[mcp.servers]]\nname = "time"\ncommand = ["mcp-server-time"]\n'
    call = McpCall("time", "tools/call", "get_current_time")
    assert verdict(call, text) == (Verdict.ASK, "capability: read-only")
    assert verdict(call, 'capability = "edit-workspace"\n' + text)[0] is Verdict.ASK
    assert verdict(call, 'capability = "full-access"\n' + text)[0] is Verdict.ALLOW
    # reading a prompt or resource no rule names is allowed
    assert verdict(McpCall("time", "prompts/get", "x"), text)[0] is Verdict.ALLOW


def test_resources_are_judged_by_their_uri() -> None:
    assert verdict(McpCall("fs", "resources/read", "file:///etc/passwd"))[0] is Verdict.DENY
    assert verdict(McpCall("fs", "resources/read", "file:///work/ws/a"))[0] is Verdict.ALLOW


def test_a_call_to_a_server_the_job_does_not_name_is_refused_by_the_ceiling() -> None:
    d = decide(McpCall("evil", "tools/call", "x"), bound())
    assert d.verdict is Verdict.DENY and d.by == "capability" and "'evil'" in d.reason


@pytest.mark.parametrize(
    ("section", "key", "words"),
    [
        ('[[mcp.servers]]\nname = "a b"\ncommand = ["x"]', "mcp.servers[0].name", "letters"),
        ('[[mcp.servers]]\nname = "a"\n', "mcp.servers[0]", "exactly one"),
        ('[[mcp.servers]]\nname = "a"\ncommand = ["x"]\nurl = "https://h"', "mcp.servers[0]", "exactly one"),
        ('[[mcp.servers]]\nname = "a"\nurl = "ftp://h"', "mcp.servers[0].url", "http"),
        ('[[mcp.servers]]\nname = "a"\ncommand = ["x"]\nenv = ["A=1"]', "mcp.servers[0].env", "names only"),
        ('[[mcp.servers]]\nname = "a"\ncommand = ["x"]\ncomand = 1', "mcp.servers[0].comand", "command"),
        ('[[mcp.servers]]\nname = "a"\ncommand = ["x"]\ntimeout = 0', "mcp.servers[0].timeout", "above 0"),
        ('[[mcp.servers]]\nname = "a"\ncommand = ["x"]\nwritable = true', "mcp.servers[0].writable", "read-only"),
        ('[[mcp.servers]]\nname = "a"\ncommand = ["x"]\n[[mcp.servers]]\nname = "a"\ncommand = ["y"]', "mcp.servers[1].name", "twice"),
        ('[mcp.allow]\ntools = ["nodot"]', "mcp.allow.tools[0]", "server.name"),
        ('[mcp.deny]\ntool = ["a.b"]', "mcp.deny.tool", "tools"),
        ('[mcp.deny]\nprompts = [{ tool = "a.b" }]', "mcp.deny.prompts[0]", "string"),
        ('[mcp.deny]\ntools = [{ tool = "a.b", args = { path = 1 } }]', "mcp.deny.tools[0].args.path", "glob"),
        ('[mcp]\nserver = []', "mcp.server", "servers"),
        ('[[mcp.servers]]\nname = "a"\nurl = "https://u:p@h/mcp"', "mcp.servers[0].url", "headers"),
        ('[[mcp.servers]]\nname = "a"\nurl = "https://h"\nenv = ["A"]', "mcp.servers[0].env", "command server"),
        ('[[mcp.servers]]\nname = "a"\nurl = "https://h"\nnetwork = ["x:1"]', "mcp.servers[0].network", "command server"),
        ('[[mcp.servers]]\nname = "a"\ncommand = ["x"]\nheaders = { A = "B" }', "mcp.servers[0].headers", "url"),
        ('[[mcp.servers]]\nname = "a"\nurl = "https://h"\nheaders = { Mcp-Session-Id = "B" }', "mcp.servers[0].headers", "itself"),
        ('[[mcp.servers]]\nname = "a"\nurl = "https://h"\nheaders = { "a b" = "B" }', "mcp.servers[0].headers", "header name"),
        ('[[mcp.servers]]\nname = "a"\nurl = "https://h"\nheaders = ["A"]', "mcp.servers[0].headers", "table"),
    ],
)
def test_a_bad_mcp_section_is_refused_naming_the_file_and_the_key(
    section: str, key: str, words: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_policy(section, "job.toml")
    assert caught.value.source == "job.toml"
    assert caught.value.key == key
    assert words in str(caught.value)


def test_a_policy_without_mcp_names_no_server() -> None:
    p = parse_policy('capability = "read-only"\n', "job.toml")
    assert p.mcp.servers == () and p.capability is Capability.READ_ONLY


def test_a_permission_for_a_relayed_tool_is_decided_by_the_mcp_rules_and_its_paths() -> None:
    from governor.policies.actions import ToolPermission

    policy = bound()
    allowed = decide(ToolPermission("other", "mcp__git__git_status", {"repo_path": "/work/ws"}), policy)
    assert (allowed.verdict, allowed.rule) == (Verdict.ALLOW, "mcp.allow: git.git_*")
    refused = decide(ToolPermission("other", "mcp__git__git_commit", {}), policy)
    assert (refused.verdict, refused.rule) == (Verdict.DENY, "mcp.deny: git.git_commit")
    # a path its input names is judged too: outside the roots, refused whatever the rule
    outside = decide(ToolPermission("other", "mcp__fs__read_text_file", {"path": "/etc/passwd"}), policy)
    assert outside.verdict is Verdict.DENY and outside.rule == "boundary: roots"
    # not a relayed server, or another kind than `other`: judged as before
    other = decide(ToolPermission("other", "mcp__evil__x", {}), policy)
    assert other.rule == "kind: other"
    disguised = decide(ToolPermission("execute", "mcp__git__git_status", {"command": "rm -rf /"}), policy)
    assert "mcp." not in disguised.rule and "rm -rf" in disguised.reason  # judged as the command


def test_a_permission_naming_a_relayed_tool_in_its_tool_name_is_decided_by_the_mcp_rules() -> None:
    """Qwen Code: the title is the arguments' JSON, the tool is `_meta.toolName`,
    the kind ``read`` for a tool its server marks read-only (else ``other``)."""
    from governor.policies.actions import ToolPermission

    policy = bound()

    def qwen(kind: str, name: str, raw: dict[str, object], text: str = POLICY) -> tuple[Verdict, str]:
        import json

        d = decide(ToolPermission(kind, json.dumps(raw), raw, tool_name=name), bound(text))
        return d.verdict, d.rule

    # a read the kind's default would allow is refused by the [mcp] rule ...
    assert qwen("read", "mcp__git__git_commit", {"message": "x"}) == (Verdict.DENY, "mcp.deny: git.git_commit")
    before = decide(ToolPermission("read", '{"message": "x"}', {"message": "x"}), policy)
    assert before.verdict is Verdict.ALLOW  # the same request without the name
    # ... and an `other` the kind's default would ask about is allowed by one
    assert qwen("other", "mcp__git__git_status", {}) == (Verdict.ALLOW, "mcp.allow: git.git_*")
    assert qwen("other", "mcp__git__git_reset", {}) == (Verdict.ASK, "mcp.ask: git.git_reset")
    # argument patterns see the input; a path it names is judged too
    assert qwen("read", "mcp__fs__read_file", {"path": "/work/ws/.env"})[0] is Verdict.DENY
    assert qwen("read", "mcp__fs__read_file", {"path": "/etc/passwd"}) == (Verdict.DENY, "boundary: roots")
    assert qwen("read", "mcp__fs__read_file", {"path": "/work/ws/a.txt"}) == (Verdict.ALLOW, "mcp.allow: fs.*")
    # the name is the agent's word: it never lifts a rule naming the kind ...
    strict = POLICY.replace("[mcp.deny]", '[deny]\ntools = ["read"]\n\n[mcp.deny]')
    assert qwen("read", "mcp__git__git_status", {}, strict) == (Verdict.DENY, "deny: tool read")
    # ... nor makes an execute or an edit anything but what it is
    execute = decide(ToolPermission("execute", "rm", {"command": "rm -rf /"}, tool_name="mcp__git__git_status"), policy)
    assert "mcp." not in execute.rule and "rm -rf" in execute.reason
    edit = decide(ToolPermission("edit", "w", {"file_path": "/etc/x"}, tool_name="mcp__fs__write_file"), policy)
    assert "mcp." not in edit.rule and edit.verdict is Verdict.DENY
    # a server the job does not name: judged as before
    assert qwen("other", "mcp__evil__x", {})[1] == "kind: other"
