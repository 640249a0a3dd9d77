"""Hook managers' and editors' configs are protected by default; a policy may
unprotect one (``unprotect``), and nothing else: not git's internals, not the
agent's or the governor's own controls; a glob the ceiling protects wins."""

from __future__ import annotations

import pytest

from governor.policies.actions import WriteFile
from governor.policies.decide import decide
from governor.policies.errors import ConfigError
from governor.policies.policy import parse_policy
from governor.policies.protected import UNPROTECTABLE

WS = "/work/app"
EDIT = 'capability = "edit-workspace"\n'


def verdict(policy_text: str, rel: str, *, ceiling: tuple[str, ...] = ()) -> str:
    policy = parse_policy(policy_text, "job.toml").bind(WS, protected=ceiling)
    return str(decide(WriteFile(f"{WS}/{rel}"), policy).verdict)


@pytest.mark.parametrize(
    "rel", [".pre-commit-config.yaml", "lefthook.yml", ".config/lefthook.yaml", ".zed/tasks.json",
            ".devcontainer.json", "mise.toml", ".config/mise/config.toml", ".tool-versions", ".nvim.lua"],
)  # fmt: skip
def test_a_config_the_host_runs_later_is_protected_by_default(rel: str) -> None:
    assert verdict(EDIT, rel) == "deny"
    assert verdict(EDIT, f"docs/{rel.replace('/', '-')}") == "allow"  # neighbour: elsewhere


def test_a_protected_file_is_editable_once_a_policy_unprotects_it() -> None:
    policy = EDIT + 'unprotect = [".pre-commit-config.yaml", ".vscode"]\n'
    assert verdict(policy, ".pre-commit-config.yaml") == "allow"
    assert verdict(policy, ".vscode/tasks.json") == "allow"
    assert verdict(policy, "lefthook.yml") == "deny"  # the others stay protected


def test_a_glob_the_ceiling_protects_stays_protected_when_the_policy_unprotects_it() -> None:
    policy = EDIT + 'unprotect = [".pre-commit-config.yaml"]\n'
    assert verdict(policy, ".pre-commit-config.yaml", ceiling=(".pre-commit-*",)) == "deny"


@pytest.mark.parametrize("name", [".git", ".git/hooks", ".gitmodules", ".claude", ".acp-governor", ".bashrc"])
def test_unprotecting_git_internals_controls_or_rc_files_is_an_error_naming_the_culprit(name: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_policy(EDIT + f'unprotect = ["{name}"]\n', "job.toml")
    assert "job.toml" in str(e.value) and "unprotect" in str(e.value) and repr(name) in str(e.value)
    assert name not in UNPROTECTABLE


def test_unprotect_takes_an_array_of_names() -> None:
    with pytest.raises(ConfigError, match=r"unprotect.*array of strings"):
        parse_policy(EDIT + 'unprotect = ".vscode"\n', "job.toml")
