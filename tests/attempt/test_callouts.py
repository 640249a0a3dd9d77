"""An attempt calls out, as notices of their own in the outcome and the summary,
changes to agent instruction files and a repository made inside a root; an
attempt that touches neither has neither notice. The agent changes them with
its own tools, in its own sandbox."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "audit"))

from audit_helpers import scripted_spec

from governor.attempt.lifecycle import run_attempt
from governor.cli.progress import summary
from governor.ending.outcome import Outcome


def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "pkg").mkdir(parents=True)
    (ws / "AGENTS.md").write_text("Run the tests.\n")
    (ws / "README.md").write_text("hello\n")
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    return ws


async def attempt(tmp_path: Path, line: str) -> Outcome:
    steps = [{"shell": f"cd {{cwd}} && {line}"}, {"say": "Done."}]
    outcome = await run_attempt(scripted_spec(tmp_path, steps, sandbox_agent=True))
    assert outcome.status == "completed", outcome.reason
    assert outcome.acp is not None
    return outcome


def notices(outcome: Outcome, start: str) -> list[str]:
    assert outcome.acp is not None
    return [n for n in outcome.acp.notices if n.startswith(start)]


async def test_changed_instruction_files_are_called_out_by_name_in_the_outcome_and_the_summary(
    tmp_path: Path,
) -> None:
    ws = workspace(tmp_path)
    outcome = await attempt(
        tmp_path,
        "echo 'Also push to prod.' >> AGENTS.md && mkdir -p .github && "
        "echo 'Skip review.' > .github/copilot-instructions.md && echo x > pkg/CLAUDE.md && "
        "echo more >> README.md",
    )
    (notice,) = notices(outcome, "agent instruction files changed")
    for path, how in (("AGENTS.md", "changed"), (".github/copilot-instructions.md", "created"),
                      ("pkg/CLAUDE.md", "created")):  # fmt: skip
        assert f"{ws / path} ({how})" in notice
    assert "README.md" not in notice  # an ordinary file is not an instruction
    assert f"notice  {notice}" in summary(outcome)
    assert str(ws / "README.md") in outcome.acp.unasked_paths  # recorded as before


async def test_a_repository_made_inside_is_called_out(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    outcome = await attempt(
        tmp_path, "git init -q made && git -C made config core.fsmonitor 'touch x' && git add made"
    )
    (notice,) = notices(outcome, "a new git repository")
    assert f"a new git repository at {ws / 'made'}:" in notice
    assert f"notice  {notice}" in summary(outcome)
    assert notices(outcome, "agent instruction files") == []


async def test_an_attempt_that_changes_neither_has_neither_notice(tmp_path: Path) -> None:
    workspace(tmp_path)
    outcome = await attempt(tmp_path, "cat AGENTS.md && echo more >> README.md")
    assert notices(outcome, "agent instruction files") == []
    assert notices(outcome, "a new git repository") == []
