"""Files the host runs later: hook managers' configs (the person's next ``git
commit``), what runs when a person enters or opens the folder (``cd`` with
direnv or mise, an editor's tasks, a dev container), and git's alternates.

Each attack runs in the real sandbox as root and as the unprivileged user, by a
bwrap of its own and by a session (the ``box`` fixture), and is judged on the
host; its neighbour (an ordinary file, a commit, a name a policy unprotected)
still works in the same command.
"""

from __future__ import annotations

import pytest
from escape_harness import GIT_IDENTITY, Box

from governor.policies.protected import AUTO_RUN, HOOK_CONFIGS

FILES = [n for n in (*HOOK_CONFIGS, *AUTO_RUN) if n not in (".vscode", ".idea", ".devcontainer", ".envrc")]
"""The names test_escapes.py does not already attack (a folder gets a file inside)."""


def plant(rel: str) -> str:
    """A shell line that makes ``rel`` hold code, whatever is in the way."""
    return f"rm -rf {rel}; mkdir -p $(dirname {rel}); echo 'run: touch /tmp/pwn' > {rel}"


def planted(box: Box, names: list[str]) -> list[str]:
    """The names that exist on the host after the run (none existed before)."""
    return [rel for rel in names if (box.ws / rel).exists()]


@pytest.mark.parametrize(
    "group",
    [[n for n in FILES if n in HOOK_CONFIGS], [n for n in FILES if n in AUTO_RUN]],
    ids=["hook-managers", "enter-or-open"],
)
def test_a_config_the_host_runs_later_cannot_be_planted(box: Box, group: list[str]) -> None:
    box.run("; ".join(plant(rel) for rel in group) + "; echo ok > allowed.txt; mkdir -p src && echo x > src/a")
    assert planted(box, group) == []
    assert (box.ws / "allowed.txt").read_text() == "ok\n"  # neighbour
    assert (box.ws / "src" / "a").read_text() == "x\n"
    assert sorted(p.name for p in box.ws.iterdir()) == [".git", "README.md", "allowed.txt", "src"]


def test_an_existing_pre_commit_config_cannot_be_rewritten_replaced_or_removed(box: Box) -> None:
    config = box.write(box.ws / ".pre-commit-config.yaml", "repos: []\n")
    box.write(box.ws / "mise.toml", "[tools]\n")
    outcome = box.run(
        "printf 'repos:\\n- repo: local\\n  hooks: [{id: x, entry: touch /tmp/pwn}]\\n' "
        ">> .pre-commit-config.yaml; rm -f .pre-commit-config.yaml; mv mise.toml m; "
        "echo '[hooks]' > mise.toml; cat .pre-commit-config.yaml"
    )
    assert config.read_text() == "repos: []\n"
    assert (box.ws / "mise.toml").read_text() == "[tools]\n" and not (box.ws / "m").exists()
    assert "repos: []" in outcome.text  # neighbour: readable


def test_a_name_the_policy_unprotects_is_editable_and_the_others_stay_protected(box: Box) -> None:
    config = box.write(box.ws / ".pre-commit-config.yaml", "repos: []\n")
    box.run(
        "echo 'repos: [local]' > .pre-commit-config.yaml; " + plant("lefthook.yml"),
        unprotected=[".pre-commit-config.yaml"],
    )
    assert config.read_text() == "repos: [local]\n"
    assert planted(box, ["lefthook.yml"]) == []


def test_git_alternates_cannot_be_planted_beside_a_commit(box: Box) -> None:
    elsewhere = box.mkdir(box.dir / "store")
    info = box.ws / ".git" / "objects" / "info"
    before = sorted(p.name for p in info.iterdir())
    box.run(
        f"echo {elsewhere} > .git/objects/info/alternates; "
        "echo http://example.invalid/objects > .git/objects/info/http-alternates; "
        "mv .git/objects/info .git/objects/i2; mv .git/objects .git/o2; "
        "echo inside > inside.txt && git add inside.txt && git commit -q -m inside",
        env=GIT_IDENTITY,
    )
    assert sorted(p.name for p in info.iterdir()) == before
    assert box.git("log", "--format=%s").stdout.split() == ["inside", "init"]  # neighbour
    assert box.git("fsck", "--no-progress").returncode == 0
