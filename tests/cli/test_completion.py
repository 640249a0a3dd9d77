"""Completion scripts, run by the real shells: options, subcommands, and the
values an option takes (choices, the presets, the shipped policies)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

GOVERNOR = str(Path(sys.executable).parent / "governor")


def script(shell: str, tmp_path: Path) -> Path:
    path = tmp_path / f"governor.{shell}"
    done = subprocess.run(
        [GOVERNOR, "completion", shell], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    path.write_text(done.stdout)
    return path


def bash_completes(tmp_path: Path, *words: str) -> list[str]:
    """What bash's completion function offers for ``governor WORDS`` (the last
    word is the one being completed), run in an empty folder."""
    source = script("bash", tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir(exist_ok=True)
    quoted = " ".join(f"'{w}'" for w in ("governor", *words))
    program = (
        f"source '{source}'; COMP_WORDS=({quoted}); COMP_CWORD={len(words)}; "
        'COMPREPLY=(); _governor; printf "%s\\n" "${COMPREPLY[@]}"'
    )
    done = subprocess.run(
        ["bash", "-c", program], capture_output=True, text=True, timeout=60, cwd=empty
    )
    assert done.returncode == 0, done.stderr
    return [w for w in done.stdout.splitlines() if w]


def test_bash_completes_commands_options_and_the_values_options_take(tmp_path: Path) -> None:
    assert bash_completes(tmp_path, "au") == ["audit"]
    assert bash_completes(tmp_path, "run", "--appr") == ["--approvals"]
    assert bash_completes(tmp_path, "run", "--approvals", "") == ["unattended", "person", "pause"]
    assert "demo" in bash_completes(tmp_path, "run", "--agent", "")
    assert bash_completes(tmp_path, "run", "--agent", "de") == ["demo"]
    assert bash_completes(tmp_path, "run", "--policy", "edit") == ["edit-workspace"]
    assert bash_completes(tmp_path, "completion", "") == ["bash", "zsh", "fish"]
    # a value that is a file: the folder's files are offered too
    (tmp_path / "empty").mkdir(exist_ok=True)
    (tmp_path / "empty" / "edit-mine.toml").write_text("")
    assert bash_completes(tmp_path, "run", "--policy", "edit") == [
        "edit-workspace",
        "edit-mine.toml",
    ]


@pytest.mark.skipif(
    shutil.which("fish") is None and not os.environ.get("CI"), reason="fish is not installed"
)
def test_fish_completes_commands_with_their_help_and_the_values_options_take(
    tmp_path: Path,
) -> None:
    source = script("fish", tmp_path)

    def fish(line: str) -> list[str]:
        done = subprocess.run(
            ["fish", "--no-config", "-c", f"source '{source}'; complete -C'{line}'"],
            capture_output=True, text=True, timeout=60, cwd=tmp_path,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()

    assert fish("governor ru") == ["run\trun one governed attempt of an agent at a task"]
    assert fish("governor run --agent de") == ["demo"]
    assert fish("governor run --policy read") == ["read-only"]
    assert fish("governor completion ") == ["bash", "fish", "zsh"]
    assert fish("governor run --appr") == ["--approvals"]
