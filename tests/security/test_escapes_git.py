"""git at edit-workspace: a commit made inside lands on the host, and whatever can
run code at the person's next host ``git`` stays out of reach.

Every attack runs as root and as the unprivileged user, through a bwrap of its
own and through a session's sandbox (the ``box`` fixture), with a commit beside
it in the same command, and is judged on the host: the file is not there, the
config has the same bytes, the next host commit runs no planted hook. The
read-only switch (``git_read_only``) has its tests in test_escapes.py.
"""

from __future__ import annotations

import secrets
import shutil
from pathlib import Path

from escape_harness import GIT_IDENTITY, Box


def marker() -> str:
    return "govtest-" + secrets.token_hex(4)


def plant_hook(path: str, proof: Path) -> str:
    """A shell line that writes an executable hook at ``path`` touching ``proof``."""
    return f"printf '#!/bin/sh\\ntouch {proof}\\n' > {path}; chmod +x {path}"


def commit_inside(name: str, cwd: str = ".") -> str:
    return f"echo {name} > {cwd}/{name}.txt && git -C {cwd} add {name}.txt && git -C {cwd} commit -q -m {name}"


def subjects(box: Box, cwd: Path | None = None) -> list[str]:
    return box.git("log", "--format=%s", cwd=cwd).stdout.split()


def host_commit_runs_no_hook(box: Box, proof: Path, cwd: Path | None = None) -> None:
    box.git("commit", "-q", "--allow-empty", "-m", "host", cwd=cwd)
    assert not proof.exists()


def protected_parts(git_dir: Path) -> dict[str, bytes | None]:
    """What runs code in ``git_dir``: config's bytes, every file under hooks/ and
    info/, and whether each other protected name exists."""
    state: dict[str, bytes | None] = {"config": (git_dir / "config").read_bytes()}
    for folder in ("hooks", "info"):
        for path in sorted((git_dir / folder).rglob("*")):
            state[str(path.relative_to(git_dir))] = path.read_bytes() if path.is_file() else None
    for name in ("config.worktree", "modules", "worktrees", "commondir"):
        state[name] = b"exists" if (git_dir / name).exists() else None
    return state


GIT_EVERYDAY = (
    "for c in status log 'worktree list' 'submodule status' gc; do "
    "git $c >/dev/null 2>&1; echo \"$c=$?\"; done; "
    "echo more >> inside.txt && git stash -q && git stash pop -q; echo stash=$?"
)


def test_a_commit_made_inside_lands_on_the_host_and_everyday_git_works(box: Box) -> None:
    outcome = box.run(f"{commit_inside('inside')}; {GIT_EVERYDAY}", env=GIT_IDENTITY)
    assert outcome.error is None, outcome.error
    for command in ("status", "log", "worktree list", "submodule status", "gc", "stash"):
        assert f"{command}=0" in outcome.text, outcome.text
    assert subjects(box) == ["inside", "init"]
    assert box.git("show", "HEAD:inside.txt").stdout == "inside\n"
    assert box.git("fsck", "--no-progress").returncode == 0
    assert box.git("status", "--porcelain").stdout == " M inside.txt\n"  # the stash popped
    for name in ("config.worktree", "modules", "worktrees", "commondir"):
        assert not (box.ws / ".git" / name).exists(), name  # placeholders gone


def test_git_config_and_config_worktree_cannot_be_written_beside_a_commit(box: Box) -> None:
    proof = box.dir / marker()
    before = protected_parts(box.ws / ".git")
    box.run(
        f"git config core.fsmonitor 'touch {proof}'; git config alias.st '!touch {proof}'; "
        f"echo '[core] fsmonitor = touch {proof}' >> .git/config; "
        f"printf '[core]\\n\\tfsmonitor = touch {proof}\\n' > .git/config.worktree; "
        f"{commit_inside('inside')}",
        env=GIT_IDENTITY,
    )
    assert subjects(box) == ["inside", "init"]  # neighbour
    assert protected_parts(box.ws / ".git") == before
    box.git("config", "extensions.worktreeConfig", "true")  # the person turns it on later
    assert box.git("status").returncode == 0
    host_commit_runs_no_hook(box, proof)


def test_a_hook_cannot_be_planted_beside_a_commit(box: Box) -> None:
    proof = box.dir / marker()
    before = protected_parts(box.ws / ".git")
    box.run(
        f"{plant_hook('.git/hooks/pre-commit', proof)}; rm -rf .git/hooks; "
        f"mv .git/hooks h; {commit_inside('inside')}",  # mv: a copy at most (EXDEV)
        env=GIT_IDENTITY,
    )
    assert subjects(box) == ["inside", "init"]
    assert not (box.ws / ".git" / "hooks" / "pre-commit").exists()
    assert protected_parts(box.ws / ".git") == before
    host_commit_runs_no_hook(box, proof)


def test_a_hook_cannot_be_planted_where_the_hooks_folder_was_deleted(box: Box) -> None:
    shutil.rmtree(box.ws / ".git" / "hooks")
    proof = box.dir / marker()
    outcome = box.run(
        f"mkdir .git/hooks; rm -f .git/hooks; mkdir -p .git/hooks; "
        f"{plant_hook('.git/hooks/pre-commit', proof)}; {commit_inside('inside')}; "
        "git -c core.hooksPath=.git/hooks commit -q --allow-empty -m hooks-file; echo rc=$?",
        env=GIT_IDENTITY,
    )
    assert "rc=0" in outcome.text  # a placeholder file named hooks: no hooks, no error
    assert subjects(box) == ["hooks-file", "inside", "init"]
    assert not (box.ws / ".git" / "hooks").exists()  # and no litter
    host_commit_runs_no_hook(box, proof)


def test_a_commondir_pointing_elsewhere_cannot_be_created(box: Box) -> None:
    proof = box.dir / marker()
    outcome = box.run(
        f"git init -q --bare evil && {plant_hook('evil/hooks/pre-commit', proof)}; "
        "echo ../evil > .git/commondir; rm -f .git/commondir; mv .git/commondir c; "
        f"cat .git/commondir; {commit_inside('inside')}; git rev-parse --git-common-dir",
        env=GIT_IDENTITY,
    )
    assert "\n.\n" in "\n" + outcome.text  # the placeholder: the git dir itself
    assert subjects(box) == ["inside", "init"]
    assert not (box.ws / ".git" / "commondir").exists()
    assert box.git("rev-parse", "--git-common-dir").stdout == ".git\n"
    host_commit_runs_no_hook(box, proof)


def test_git_cannot_be_renamed_removed_or_replaced(box: Box) -> None:
    proof = box.dir / marker()
    before = protected_parts(box.ws / ".git")
    box.run(
        "mv .git .git-old; rm -rf .git; rmdir .git; echo 'gitdir: evil' > .git; "
        "git init -q --bare evil; ln -s evil .git; git init -q .; "
        f"{plant_hook('.git/hooks/pre-commit', proof)}; "
        f"echo '[core] hooksPath = evil/hooks' >> .git/config",
        env=GIT_IDENTITY,
    )
    git_dir = box.ws / ".git"
    assert git_dir.is_dir() and not git_dir.is_symlink()
    assert not (box.ws / ".git-old").exists() and not (git_dir / "evil").exists()
    assert protected_parts(git_dir) == before  # history may go (as any file may); code may not
    host_commit_runs_no_hook(box, proof)


def test_git_info_cannot_be_written_beside_a_commit(box: Box) -> None:
    exclude = (box.ws / ".git" / "info" / "exclude").read_bytes()
    box.run(
        "echo '* filter=evil' > .git/info/attributes; echo '*.py' >> .git/info/exclude; "
        f"echo '/x' > .git/info/sparse-checkout; {commit_inside('inside')}",
        env=GIT_IDENTITY,
    )
    assert subjects(box) == ["inside", "init"]
    assert sorted(p.name for p in (box.ws / ".git" / "info").iterdir()) == ["exclude"]
    assert (box.ws / ".git" / "info" / "exclude").read_bytes() == exclude


def test_a_worktree_cannot_be_created_beside_a_commit(box: Box) -> None:
    outcome = box.run(
        "git worktree add -q wt2 2>&1; mkdir -p .git/worktrees/x; "
        f"echo {box.ws}/x/.git > .git/worktrees/x/gitdir; {commit_inside('inside')}",
        env=GIT_IDENTITY,
    )
    assert "worktrees" in outcome.text  # git says why it cannot
    assert subjects(box) == ["inside", "init"]
    assert not (box.ws / ".git" / "worktrees").exists()
    assert len(box.git("worktree", "list").stdout.splitlines()) == 1


def test_a_submodules_config_and_hooks_cannot_be_edited_but_it_commits(box: Box) -> None:
    upstream = box.mkdir(box.dir / "upstream")
    box.git("init", "-q", cwd=upstream)
    box.git("commit", "-q", "--allow-empty", "-m", "up", cwd=upstream)
    added = box.git("-c", "protocol.file.allow=always", "submodule", "add", "-q", str(upstream), "sub")
    assert added.returncode == 0, added.stderr
    box.git("commit", "-q", "-m", "with sub")
    proof = box.dir / marker()
    modules = box.ws / ".git" / "modules"
    before = protected_parts(modules / "sub")
    box.run(
        f"git -C sub config core.fsmonitor 'touch {proof}'; "
        f"echo '[core] fsmonitor = touch {proof}' >> .git/modules/sub/config; "
        f"{plant_hook('.git/modules/sub/hooks/post-checkout', proof)}; "
        "mkdir -p .git/modules/evil; mv .git/modules/sub .git/modules/s2; "
        f"{commit_inside('in-sub', 'sub')}",
        env=GIT_IDENTITY,
    )
    assert subjects(box, box.ws / "sub") == ["in-sub", "up"]  # neighbour: the submodule commits
    assert protected_parts(modules / "sub") == before
    assert sorted(p.name for p in modules.iterdir()) == ["sub"]
    box.git("submodule", "update", "--checkout")
    host_commit_runs_no_hook(box, proof, box.ws / "sub")


def test_the_same_holds_in_a_nested_repository(box: Box) -> None:
    nested = box.mkdir(box.ws / "vendor" / "lib")
    box.git("init", "-q", cwd=nested)
    box.git("commit", "-q", "--allow-empty", "-m", "lib", cwd=nested)
    proof = box.dir / marker()
    before = protected_parts(nested / ".git")
    box.run(
        f"cd vendor/lib && {plant_hook('.git/hooks/pre-commit', proof)}; "
        f"git config core.fsmonitor 'touch {proof}'; echo ../x > .git/commondir; "
        "echo '* filter=x' > .git/info/attributes; mkdir -p .git/worktrees/x .git/modules/x; "
        f"cd .. && mv lib lib2; cd lib && {commit_inside('in-nested')}",
        env=GIT_IDENTITY,
    )
    assert subjects(box, nested) == ["in-nested", "lib"]  # neighbour
    assert protected_parts(nested / ".git") == before
    assert not (box.ws / "vendor" / "lib2").exists()
    # its ancestors are mount points of their own, so mv .git ../x copies it
    # (EXDEV) and then removes what it may: the history, never what runs code
    box.run(
        f"cd vendor/lib && mv .git ../git-old; rm -rf .git; git init -q .; "
        f"{plant_hook('.git/hooks/pre-commit', proof)}",
        env=GIT_IDENTITY,
    )
    assert (nested / ".git").is_dir()
    assert protected_parts(nested / ".git") == before
    box.git("init", "-q", cwd=nested)  # the person repairs it and commits
    host_commit_runs_no_hook(box, proof, nested)


def test_a_repository_one_command_makes_commits_in_the_next_and_stays_protected(box: Box) -> None:
    """In a session's sandbox the second command's mounts were built before the
    repository existed: its git dir is opened, and its missing parts held by
    placeholders, for that command alone (governor.sandbox.run.session)."""
    proof = box.dir / marker()
    outcome = box.run(
        f"git init -q made && {commit_inside('first', 'made')}",
        then=f"{plant_hook('made/.git/hooks/pre-commit', proof)}; echo .. > made/.git/commondir; "
        f"mkdir made/.git/modules/x; {commit_inside('second', 'made')}; cat made/.git/commondir",
        env=GIT_IDENTITY,
    )
    made = box.ws / "made"
    assert subjects(box, made) == ["second", "first"]
    assert "\n.\n" in "\n" + outcome.text
    assert not (made / ".git" / "hooks" / "pre-commit").exists()
    for name in ("config.worktree", "modules", "worktrees", "commondir"):
        assert not (made / ".git" / name).exists(), name  # held for the command, then gone
    host_commit_runs_no_hook(box, proof, made)


def test_the_hosts_identity_signs_a_commit_inside_and_nothing_else_of_its_config_shows(
    box: Box,
) -> None:
    canary = "CANARY-" + secrets.token_hex(6)
    config = box.write(
        box.dir / "gitconfig",
        "[user]\n\tname = Person\n\temail = person@example.invalid\n"
        f"[http]\n\textraheader = Authorization: Bearer {canary}\n[credential]\n\thelper = store\n",
    )
    environ = {"GIT_CONFIG_GLOBAL": str(config)}  # the governor's own global config
    outcome = box.run(f"{commit_inside('inside')}; git config --list; env", environ=environ)
    assert canary not in outcome.text
    assert "helper=store" not in outcome.text
    who = ["log", "-1", "--format=%an <%ae>|%cn <%ce>"]
    assert box.git(*who).stdout == "Person <person@example.invalid>|Person <person@example.invalid>\n"
    box.run(commit_inside("declared"), env={"GIT_AUTHOR_NAME": "Bot"}, environ=environ)
    assert box.git(*who).stdout == "Bot <person@example.invalid>|Person <person@example.invalid>\n"


def test_git_add_all_inside_adds_neither_placeholders_nor_masked_secrets(box: Box) -> None:
    box.write(box.ws / ".env", "TOKEN=1\n")
    box.write(box.ws / "svc" / ".env.production", "TOKEN=2\n")
    outcome = box.run(
        "git status --porcelain --untracked-files=all; echo ---; "
        "echo new > new.txt && git add -A && git commit -q -m all; echo rc=$?",
        env=GIT_IDENTITY,
    )
    before, _, after = outcome.text.partition("---\n")
    assert before == ""  # the 27 placeholders and the two masks are not there to git
    assert "rc=0" in after, after
    assert box.git("show", "--name-only", "--format=", "HEAD").stdout.split() == ["new.txt"]
    assert box.git("status", "--porcelain").stdout == "?? .env\n?? svc/\n"  # the host's own view
