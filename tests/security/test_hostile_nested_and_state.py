"""Two places the agent could still shape what the governor does on the host
(issue 35, noticed by the outside attack and left): a repository the agent
makes inside a batch job's workspace, and a state folder inside a home folder
the agent may write.

Real attempts through the real CLI, as root and as the unprivileged govtest
user, ``TMPDIR`` under the box and ``$HOME`` the box's own; the agent works
with its own shell in its sandbox (tests/audit/scripted_agent.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from escape_harness import USERS, Account
from test_outside_attack import SCRIPTED, box_for, governor, outcome_of, python_of

from governor.cli import REFUSED_BEFORE_START

NEST = (
    "cd {cwd} && echo top > top.txt"
    " && mkdir sub && cd sub && git init -q && echo inner > inner.txt"
    " && printf '#!/bin/sh\\ntouch %s\\necho {{}}\\n' > .git/run.sh && chmod +x .git/run.sh"
    " && git config core.fsmonitor \"$PWD/.git/run.sh\" && git config core.hooksPath \"$PWD/.git\""
    " && cp .git/run.sh .git/post-index-change && git add inner.txt"
    " && git -c user.name=a -c user.email=a@b commit -q -m inner"
    " && cd .. && mkdir unborn && git -C unborn init -q && echo lonely > unborn/lonely.txt"
)
"""A repository with a commit whose config and hooks would run a program
(``sub``), and one with no commit (``unborn``), each holding a file."""


@pytest.mark.parametrize("user", USERS)
def test_a_repository_the_agent_makes_in_a_batch_job_is_its_files_in_the_patch_and_runs_nothing(
    accounts: dict[str, Account | str], user: str
) -> None:
    """Class: what the agent shapes breaks or escapes the batch's record. The
    batch's ``git add --all`` saw ``sub/.git`` and added ``sub`` as a gitlink:
    the patch said ``Subproject commit ...`` and ``sub/inner.txt`` was not in
    it; with ``unborn/.git`` (no commit) ``git add`` failed and the job lost its
    whole patch. The nested ``.git`` entries are set aside before the add: every
    file is in the patch, and the nested repository's fsmonitor and hooks never
    run on the host (the marker they would touch stays absent). The neighbour:
    the job's ordinary file is in the patch beside them."""
    box = box_for(accounts, user, "nested")
    marker = box.dir / "RAN-ON-THE-HOST"
    python = python_of(box)
    script = box.write(box.dir / "b.json", json.dumps(
        [{"shell": NEST.replace("%s", str(marker))}, {"say": "Done."}]
    ))  # fmt: skip
    job = {"id": "b", "prompt": "go", "repo": str(box.ws), "capability": "edit-workspace",
           "timeout": 120, "argv": [python, str(SCRIPTED), "--script", str(script)]}  # fmt: skip
    jobs_file = box.write(box.dir / "jobs.jsonl", json.dumps(job) + "\n")
    out = box.dir / "out"
    done = governor(box, ["batch", str(jobs_file), "--out", str(out), "--jobs", "1"])
    assert (out / "outcomes.jsonl").exists(), done.stdout[-2000:] + done.stderr[-3000:]
    line = json.loads((out / "outcomes.jsonl").read_text().splitlines()[0])
    assert line["status"] == "completed", line.get("reason")
    patch = (out / "b" / "changes.patch").read_text()
    assert "b/top.txt" in patch  # the neighbour
    assert "b/sub/inner.txt" in patch and "+inner" in patch, patch
    assert "b/unborn/lonely.txt" in patch and "+lonely" in patch, patch
    assert "Subproject commit" not in patch and ".git/" not in patch, patch
    assert not marker.exists(), "the nested repository's program ran on the host"


GOOSE_HOME_FOLDER = ".config/goose"
"""A folder the goose preset's sandbox keeps writable (presets.toml)."""


def goose_run(box: Any, state_home: Path) -> Any:
    """``governor run --agent goose`` (a stand-in on ``PATH`` that plays a script)
    with ``XDG_STATE_HOME`` at ``state_home``."""
    python = python_of(box)
    steps = json.dumps([{"shell": "cd {cwd} && echo mine > mine.txt"}, {"say": "Done."}])
    # the box's folder is not shown to a preset's sandbox: the steps travel in the stand-in
    box.write(box.dir / "bin" / "goose", f"#!/bin/sh\ncat > /tmp/g.json <<'END'\n{steps}\nEND\n"
              f"exec {python} {SCRIPTED} --script /tmp/g.json\n", mode=0o755)  # fmt: skip
    policy = box.write(box.dir / "p.toml", 'capability = "edit-workspace"\n')
    argv = ["run", "--json", "--agent", "goose", "--policy", str(policy),
            "--workspace", str(box.ws), "go"]  # fmt: skip
    environ = {"PATH": f"{box.dir / 'bin'}:/usr/bin:/bin", "XDG_STATE_HOME": str(state_home)}
    return governor(box, argv, environ=environ)


@pytest.mark.parametrize("user", USERS)
def test_a_state_folder_inside_a_home_folder_the_agent_may_write_is_refused_before_start(
    accounts: dict[str, Account | str], user: str
) -> None:
    """Class: the agent writes where the host keeps what it trusts. With
    ``XDG_STATE_HOME`` inside ``~/.config/goose`` (kept writable in the goose
    agent's sandbox) the agent could make the governor's attempts folder, the
    next attempts' sockets and workspaces and the default logs, before they
    exist and are hidden: the run is refused before start, naming the folder.
    The neighbour: a state folder outside it runs, and the agent writes its
    workspace."""
    box = box_for(accounts, user, "state")
    inside = box.home / GOOSE_HOME_FOLDER / "state"
    refused = goose_run(box, inside)
    assert refused.returncode == REFUSED_BEFORE_START, refused.stdout[-2000:] + refused.stderr[-2000:]
    problems = json.loads(refused.stdout)["problems"]
    assert any("state folder" in p and GOOSE_HOME_FOLDER in p for p in problems), problems
    assert not (inside / "acp-governor" / "attempts").exists()
    outcome = outcome_of(goose_run(box, box.dir / "state"))
    assert outcome["status"] == "completed", outcome
    assert (box.ws / "mine.txt").read_text() == "mine\n"


@pytest.mark.parametrize("user", USERS)
def test_a_job_whose_agent_lies_in_the_batchs_output_folder_is_refused_naming_it(
    accounts: dict[str, Account | str], user: str
) -> None:
    """The batch's output folder is hidden from every job's sandbox; a job
    whose agent's script was put there would fail inside on a missing file.
    It is refused before anything runs, naming the file and the folder; the
    neighbour: the same script beside the folder runs."""
    box = box_for(accounts, user, "outagent")
    out = box.mkdir(box.dir / "out")
    python = python_of(box)
    steps = json.dumps([{"shell": "cd {cwd} && echo mine > mine.txt"}, {"say": "Done."}])

    def batch(script: Path) -> Any:
        box.write(script, steps)
        job = {"id": "j", "prompt": "go", "repo": str(box.ws), "capability": "edit-workspace",
               "timeout": 120, "argv": [python, str(SCRIPTED), "--script", str(script)]}  # fmt: skip
        jobs_file = box.write(box.dir / "jobs.jsonl", json.dumps(job) + "\n")
        return governor(box, ["batch", str(jobs_file), "--out", str(out), "--jobs", "1"])

    refused = batch(out / "steps.json")
    assert refused.returncode == REFUSED_BEFORE_START, refused.stderr[-2000:]
    assert f"{out / 'steps.json'} is inside {out}" in refused.stderr
    assert not (out / "outcomes.jsonl").exists() or not (out / "outcomes.jsonl").read_text()
    done = batch(box.dir / "steps.json")
    line = json.loads((out / "outcomes.jsonl").read_text().splitlines()[0])
    assert line["status"] == "completed", done.stderr[-2000:]
