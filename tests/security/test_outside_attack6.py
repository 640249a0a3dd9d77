"""A sixth outside attack on the host boundary and the attempt's budget (the
helper "breakhost2", who built none of it): the one door's lookup, the files
the person names, the attempt's memory budget and its disk limit, as they
stood on 2026-12-03.

Each hole is a test marked ``xfail(strict=True)``: it fails today because the
attack works, and the fixer removes the mark. Its allowed neighbour, and the
attacks that held, are ordinary tests.

Real attempts through the real CLI (``python -m governor.cli``), as root and as
the unprivileged govtest user, ``TMPDIR`` under the box (not ``/tmp``) and
``$HOME`` the box's own home (not the passwd home); the agent acts with its own
shell inside its sandbox (tests/audit/scripted_agent.py), as an agent's own
Bash tool would. The harness is test_outside_attack.py's.

The holes, by class:

- a limit outrun (memory): kernel memory no process's RSS, no tmpfs and no
  memfd shows: a Unix socket's queued bytes (and System V shared memory, the
  residual docs/security.md names), past ``attempt_memory`` and past each
  process's own ``memory`` rlimit;
- a limit outrun (the disk): blocks the walk counts as nothing: a file
  unlinked and held open, folders (and links), each a block of the person's
  disk;
- a file the agent leaves runs on the host: the record of written folders
  kept names, so a project that is no git work tree, renamed by the person,
  was trusted on their ``PATH`` (`find_program`);
- a path the governor opens for the person follows a link the agent left,
  in a folder an attempt wrote that the record does not name: a renamed
  project, or one under ``/tmp`` (left out of the record), and
  ``governor audit report -o`` wrote the page through the agent's folder
  link over a file of the person's.

The last two are closed (their marks removed): the record keeps every folder
an attempt was given, temporary ones too, by its path and by its identity
(``st_dev``, ``st_ino``), and the door and `link_out` ask it of every folder
above the path they judge, so a renamed folder is still the attempt's.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from escape_harness import USERS, Account, Box
from test_outside_attack import box_for, governor, scripted_run

# -- the attempt's memory budget: kernel memory no process's RSS shows ---------------------------

MEGS = 200
"""What the agent holds: over the budget below three times, far under the host's RAM."""

BUDGET = '[limits]\nmemory = "512M"\nattempt_memory = "64M"\ntmp = "16M"\n'
"""A budget the agent's memory passes; each tmpfs of the sandbox 16M."""

SOCKETS = r"""import resource, socket, sys, time
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
want, held, pairs = int(sys.argv[1]) << 20, 0, []
chunk = b"x" * 65536
while held < want:
    a, b = socket.socketpair()
    for s in (a, b):
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
        s.setblocking(False)
    for s in (a, b):
        try:
            while held < want:
                held += s.send(chunk)
        except BlockingIOError:
            pass
    pairs.append((a, b))
print("queued", held >> 20, "MiB in", len(pairs), "socket pairs", flush=True)
time.sleep(5)
"""
"""Bytes written into Unix socket pairs and never read: the kernel keeps them
queued (sk_buffs), in no process's address space."""

SYSV = r"""import ctypes, sys, time
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
size = int(sys.argv[1]) << 20
shmid = libc.shmget(0, ctypes.c_size_t(size), 0o1600)
assert shmid >= 0, ctypes.get_errno()
at = libc.shmat(shmid, None, 0)
assert at not in (None, ctypes.c_void_p(-1).value), ctypes.get_errno()
ctypes.memset(at, 120, size)
libc.shmdt(ctypes.c_void_p(at))
print("detached", size >> 20, "MiB of System V shared memory", flush=True)
time.sleep(5)
"""
"""A System V segment of the sandbox's own IPC namespace, written, then
detached: no process maps it, no file holds it."""

PROGRAMS = {"sockets": SOCKETS, "sysv": SYSV}


def holding(
    accounts: dict[str, Account | str], user: str, how: str, megs: int = MEGS
) -> tuple[dict[str, Any], Any]:
    """The agent's own shell runs PROGRAMS[how] holding ``megs`` MiB five
    seconds (five measures), then leaves ``held.txt``."""
    box = box_for(accounts, user, f"mem6-{how}-{megs}")
    steps = [
        {"write": "{cwd}/hold.py", "text": PROGRAMS[how]},
        {"shell": f"cd {{cwd}} && python3 hold.py {megs} > hold.out 2>&1 && echo held > held.txt"},
        {"say": "Done."},
    ]
    outcome = scripted_run(box, f"mem6-{how}", BUDGET, steps)
    return outcome, box


@pytest.mark.parametrize("how", ["sockets", "sysv"])
@pytest.mark.parametrize("user", USERS)
def test_kernel_memory_an_agent_holds_under_the_attempt_budget_is_let_be(
    accounts: dict[str, Account | str], user: str, how: str
) -> None:
    """The neighbour: 16 MiB queued in Unix sockets or held in a detached
    System V segment, with the agent's own memory, stays under
    ``attempt_memory = "64M"``: the attempt completes."""
    outcome, box = holding(accounts, user, how, megs=16)
    assert outcome["status"] == "completed", outcome
    assert (box.ws / "held.txt").exists(), (box.ws / "hold.out").read_text()


@pytest.mark.parametrize("how", ["sockets", "sysv"])
@pytest.mark.parametrize("user", USERS)
def test_kernel_memory_an_agent_holds_is_counted_in_the_attempt_budget(
    accounts: dict[str, Account | str], user: str, how: str
) -> None:
    """Class: the attempt-wide budget outrun for good, not for a moment (memory
    the watcher cannot see). The agent's own shell holds 200 MiB, three times
    ``attempt_memory = "64M"``, for five seconds (five measures): written
    into Unix socket pairs and never read (the kernel queues each side's
    send buffer, raised to twice ``wmem_max``; the soft descriptor limit
    raised to the hard one), or into a System V segment then detached. The
    watcher sums RssAnon + RssShmem, the sandbox's tmpfs and overlays and
    its open memfds: none of these holds any of it, so it sums a few MiB and
    the attempt completes. Queued socket bytes also pass the per-process
    ``memory`` rlimit (RLIMIT_AS bounds an address space, not the kernel's
    queues), so no bound of the governor's applies to them at all: more
    processes, each with its descriptors, hold more. docs/security.md names
    System V memory as a residual; socket queues are not named. The mechanism
    that closes the class: the kernel's charge (a memory cgroup per attempt,
    whose ``memory.current`` counts socket buffers, shmem and kernel memory
    with ``memory.max`` refusing past it), or where none can be made a
    seccomp filter refusing ``shmget`` and a bound on a sandbox's descriptors
    and send buffers that, multiplied out, stays inside the budget."""
    outcome, box = holding(accounts, user, how)
    said = (box.ws / "hold.out").read_text() if (box.ws / "hold.out").exists() else ""
    held = (box.ws / "held.txt").exists()  # it held all of it for five seconds
    assert not held, (
        f"{MEGS} MiB held past attempt_memory 64M ({said.strip()}): {outcome['status']}"
    )
    assert outcome["status"] == "failed", outcome
    assert "memory limit 64M across its sandboxes" in outcome["reason"], outcome["reason"]


# -- the disk limit: blocks the walk counts as nothing ----------------------------------------------

DISK = '[limits]\nworkspace = "8M"\n'

UNLINKED = r"""import os, sys, time
f = open("fill", "wb")
os.unlink("fill")
for _ in range(int(sys.argv[1])):
    f.write(b"x" * (1 << 20))
f.flush()
os.fsync(f.fileno())
print("wrote", os.fstat(f.fileno()).st_blocks * 512 >> 20, "MiB unlinked", flush=True)
time.sleep(8)
"""
"""64 MiB written to the disk through a file unlinked at once and held open."""

FOLDERS = r"""import os, sys, time
os.mkdir("many")
for i in range(int(sys.argv[1]) * 256):  # one 4 KiB block each on ext4
    os.mkdir("many/" + str(i))  # no braces: the scripted agent fills them
print("made", len(os.listdir("many")), "folders", flush=True)
time.sleep(8)
"""
"""Empty folders: each takes a block of the person's disk (and an inode); git
tracks none of them."""

DISK_PROGRAMS = {"unlinked": UNLINKED, "folders": FOLDERS}


def disk_filling(
    accounts: dict[str, Account | str], user: str, how: str, megs: int
) -> tuple[dict[str, Any], Any]:
    box = box_for(accounts, user, f"disk6-{how}-{megs}")
    steps = [
        {"write": "{cwd}/fill.py", "text": DISK_PROGRAMS[how]},
        {"shell": f"cd {{cwd}} && python3 fill.py {megs} > fill.out 2>&1 && echo held > held.txt"},
        {"say": "Done."},
    ]
    return scripted_run(box, f"disk6-{how}", DISK, steps), box


def blocks_under(folder: Path) -> int:
    """Bytes of disk the entries under ``folder`` take (``du``'s count)."""
    total = 0
    for top, dirs, files in os.walk(folder):
        for name in [*dirs, *files]:
            total += os.lstat(os.path.join(top, name)).st_blocks * 512
    return total


@pytest.mark.parametrize("how", ["unlinked", "folders"])
@pytest.mark.parametrize("user", USERS)
def test_a_little_disk_held_so_under_the_workspace_limit_is_let_be(
    accounts: dict[str, Account | str], user: str, how: str
) -> None:
    """The neighbour: 2 MiB held in an unlinked file, or 512 empty folders
    (2 MiB of blocks), stay under ``workspace = "8M"``: the attempt completes."""
    outcome, box = disk_filling(accounts, user, how, 2)
    assert outcome["status"] == "completed", outcome
    assert (box.ws / "held.txt").exists(), (box.ws / "fill.out").read_text()


@pytest.mark.parametrize("how", ["unlinked", "folders"])
@pytest.mark.parametrize("user", USERS)
def test_disk_an_agent_holds_outside_a_regular_files_size_is_counted_in_the_workspace_limit(
    accounts: dict[str, Account | str], user: str, how: str
) -> None:
    """Class: the disk limit outrun (blocks the walk counts as nothing). The
    walk (`governor.attempt.roots_size.measure`) adds the apparent size of
    each regular file it finds and nothing else. The agent's own shell
    writes 64 MiB, eight times ``workspace = "8M"``, into a file it unlinks
    at once and keeps open (on the disk until the sandbox goes: the walk
    never finds a name), or makes 16,384 empty folders (64 MiB of the
    person's disk, one block and one inode each, for good: git tracks no
    empty folder, so no change names them; a link with a long target takes
    a block too, not tried here), and waits past several walks: the attempt completes. The same writes of
    gigabytes, or of millions of folders (the filesystem's inodes), fill the
    person's disk. The mechanism that closes the class: the disk the
    filesystem gave, not sizes the walk adds up: every entry's ``st_blocks``
    (folders and links included) and the blocks of the files the sandbox's
    processes hold open (``/proc/PID/fd``, as the memory budget counts
    memfds), or a quota (a project id on the roots)."""
    outcome, box = disk_filling(accounts, user, how, 64)
    said = (box.ws / "fill.out").read_text() if (box.ws / "fill.out").exists() else ""
    taken = blocks_under(box.ws / "many") if how == "folders" else 64 << 20
    held = (box.ws / "held.txt").exists() and taken > 32 << 20
    assert not (held and outcome["status"] == "completed"), (
        f"{taken >> 20} MiB of disk held past workspace = 8M ({said.strip()})"
    )


# -- the one door's lookup: a folder the record knows by a name it no longer has -------------------

PLANTED = '#!/bin/sh\necho "ran on the host as $(id -u) in $PWD" > {marker}\nexit 1\n'
"""What the agent leaves as a program: it says it ran, where the host can see it."""


def plant_move_install(
    accounts: dict[str, Account | str], user: str, name: str, moved: bool
) -> tuple[Any, Any, Path]:
    """A project that is no git work tree (a folder of scripts, data, a
    notebook's): attempt 1's agent leaves ``.venv/bin/python3.30`` there. The
    person then renames the project (``mv proj proj-old``, when ``moved``) and,
    its venv active, runs ``governor agents install vibe`` from it. The box,
    the install's result, and the marker the program writes when run."""
    box = box_for(accounts, user, name)
    marker = box.dir / "ran-on-host"
    box.host("rm", "-rf", str(box.ws / ".git"))
    text = PLANTED.format(marker=marker)
    steps = [
        {"shell": "mkdir -p {cwd}/.venv/bin"},
        {"write": "{cwd}/.venv/bin/python3.30", "text": text},
        {"shell": "chmod +x {cwd}/.venv/bin/python3.30"},
        {"say": "Done."},
    ]
    outcome = scripted_run(box, name, "", steps)
    assert outcome["status"] == "completed", outcome
    assert (box.ws / ".venv" / "bin" / "python3.30").exists()
    project = box.ws
    if moved:
        project = box.dir / "proj-old"
        box.host("mv", str(box.ws), str(project), cwd=box.dir)
        assert (project / ".venv" / "bin" / "python3.30").exists()
    path = f"{project / '.venv' / 'bin'}:/usr/bin:/bin"
    # no index, no registry: the install fails offline after looking for its program
    done = governor(
        box,
        ["agents", "install", "vibe"],
        environ={"PATH": path, "PIP_NO_INDEX": "1", "npm_config_offline": "true"},
    )
    return box, done, marker


@pytest.mark.parametrize("user", USERS)
def test_agents_install_runs_no_program_an_attempt_left_in_a_project_that_is_no_git_tree(
    accounts: dict[str, Account | str], user: str
) -> None:
    """The neighbour (held): the same planted ``python3.30``, the project where
    the attempt ran it: the record of written folders names it, the lookup
    passes over it, and the planted file never runs."""
    _box, done, marker = plant_move_install(accounts, user, "inst6-here", moved=False)
    assert not marker.exists(), (marker.read_text(), done.stderr[-1500:])


@pytest.mark.parametrize("user", USERS)
def test_agents_install_runs_no_program_an_attempt_left_after_the_person_renames_its_project(
    accounts: dict[str, Account | str], user: str
) -> None:
    """Class: a file the agent leaves runs on the host (a program found where
    the record of written folders does not know it). `remember_written`
    keeps each folder an attempt was given by its path; `find_program`
    passes over a ``PATH`` entry under one of them, or inside a git work tree.
    A project that is no git work tree, renamed by the person after the
    attempt (``mv proj proj-old``), is a folder the record no longer names:
    its ``.venv/bin`` (first on the person's ``PATH``, the venv active) is
    trusted, and the ``python3.30`` the agent left there runs as the person,
    outside every sandbox, when ``governor agents install vibe`` asks it its
    version. The same holds for a copy of the project, a project moved to
    another disk, and a record in another ``$XDG_STATE_HOME`` (another
    ``$HOME``, sudo): the record is of names. The mechanism that closes the
    class: what the record keeps survives a rename (a folder's identity, a
    mark the agent cannot remove), or no ``PATH`` entry is trusted for a host
    program unless it is a system or toolchain folder the operator named."""
    _box, done, marker = plant_move_install(accounts, user, "inst6-moved", moved=True)
    assert not marker.exists(), (marker.read_text(), done.stderr[-1500:])


# -- a file the person names: a folder link the record no longer knows ------------------------------

PAGE = "<html>the person's own page, not the governor's to write</html>\n"


def report_through_folder_link(
    accounts: dict[str, Account | str], user: str, name: str, moved: bool, in_tmp: bool = False
) -> tuple[Any, Path, Any]:
    """Attempt 1's agent leaves ``reports -> SITE`` in its workspace (a folder of
    the person's outside every root: their web site, another project's docs,
    where an ``index.html`` of theirs is). The person renames the project
    (``mv ws proj-old``, when ``moved``) and writes the run's report where
    they keep it, ``governor audit report LOG -o PROJECT/reports/index.html``.
    When ``in_tmp``, the project is a scratch folder under ``/tmp`` (a clone
    to try something in). The box, the person's page, the report's result."""
    box = box_for(accounts, user, name)
    if in_tmp:
        account = accounts[user]
        assert isinstance(account, Account)
        scratch = Path(tempfile.mkdtemp(prefix=f"{name}-", dir="/tmp"))
        os.chown(scratch, account.uid, account.gid)
        ws = Box(user, account, scratch / "p").ws
        box.ws = ws  # the project under /tmp; the box's home, logs and site stay
    site = box.mkdir(box.dir / "site")
    page = box.write(site / "index.html", PAGE)
    steps = [{"shell": f"cd {{cwd}} && ln -s {site} reports"}, {"say": "Done."}]
    outcome = scripted_run(box, name, "", steps)
    assert outcome["status"] == "completed", outcome
    project = box.ws
    if moved:
        project = box.dir / "proj-old"
        box.host("mv", str(box.ws), str(project), cwd=box.dir)
    assert (project / "reports").is_symlink()
    log = box.dir / f"{name}.jsonl"
    done = governor(
        box, ["audit", "report", str(log), "-o", str(project / "reports" / "index.html")]
    )
    return box, page, done


@pytest.mark.parametrize("user", USERS)
def test_the_report_is_not_written_through_a_folder_link_an_attempt_left_in_its_project(
    accounts: dict[str, Account | str], user: str
) -> None:
    """The neighbour (held): the same link, the project where the attempt ran:
    the record names the workspace, `link_out` refuses ``reports`` (a link
    out of a folder an attempt could write), naming it, and the person's page
    is untouched."""
    _box, page, done = report_through_folder_link(accounts, user, "page6-here", moved=False)
    assert page.read_text() == PAGE
    assert done.returncode != 0 and "reports is a link to" in done.stderr, done.stderr[-1500:]


@pytest.mark.parametrize("user", USERS)
def test_the_report_is_not_written_through_a_folder_link_an_attempt_left_after_a_rename(
    accounts: dict[str, Account | str], user: str
) -> None:
    """Class: a path the governor opens for the person follows a link the
    agent left (the record of written folders keeps names). `link_out`
    refuses a link in a folder the record names that leads out of it; the
    person renames the project after the attempt (``mv ws proj-old``), and
    ``proj-old`` is a folder the record does not name: ``reports -> SITE``
    is followed, and the person's ``SITE/index.html`` (an existing regular
    file: truncated, then written) becomes the report page. As root, the
    link may name any folder of the machine; ``--events``, ``--log`` (in a
    later run with another workspace), ``--prompt-file`` and ``--policy``
    follow the same rule. The mechanism that closes the class: what the
    record keeps survives a rename (a folder's identity), or a link is
    followed only when its owner is not the one an agent runs as and no
    attempt could have made it."""
    _box, page, done = report_through_folder_link(accounts, user, "page6-moved", moved=True)
    assert page.read_text() == PAGE, (page.read_text()[:300], done.stderr[-1500:])


@pytest.mark.parametrize("user", USERS)
def test_the_report_is_not_written_through_a_folder_link_an_attempt_left_in_a_project_under_tmp(
    accounts: dict[str, Account | str], user: str
) -> None:
    """Class: a path the governor opens for the person follows a link the
    agent left (a folder an attempt wrote that the record does not name).
    `remember_written` leaves out every folder under ``/tmp``, ``/var/tmp``
    and ``/dev/shm`` ("always refused for a program"), and `written_places`
    adds no temporary folder back: for the files the person names, a
    project under ``/tmp`` is a folder no attempt wrote. The attempt runs in
    ``/tmp/.../ws`` (a scratch clone) and leaves ``reports -> SITE``; no
    rename: ``governor audit report LOG -o /tmp/.../ws/reports/index.html``
    follows it and the person's ``SITE/index.html`` becomes the report page.
    The mechanism that closes the class: the folders `link_out` holds are
    every folder an attempt was given, temporary ones too (kept in the
    record, or the temporary folders always among them)."""
    box, page, done = report_through_folder_link(
        accounts, user, "page6-tmp", moved=False, in_tmp=True
    )
    shutil.rmtree(box.ws.parent.parent, ignore_errors=True)  # the scratch folder under /tmp
    assert page.read_text() == PAGE, (page.read_text()[:300], done.stderr[-1500:])


# -- what held ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("user", USERS)
def test_a_prompt_file_an_attempt_made_a_fifo_is_refused_naming_it_and_blocks_nothing(
    accounts: dict[str, Account | str], user: str
) -> None:
    """Held: the project keeps its task in ``prompts/task.md``; attempt 1's
    agent replaces it with a FIFO (``mkfifo``), which a plain ``open`` would
    wait on for ever. The person's next ``governor run --prompt-file
    prompts/task.md`` opens it without blocking, sees it is no regular file
    and refuses, naming it: no agent starts, nothing hangs."""
    from test_outside_attack import SCRIPTED, outcome_of, python_of

    box = box_for(accounts, user, "prompt-fifo")
    box.write(box.ws / "prompts" / "task.md", "Fix the tests.\n")
    steps = [
        {"shell": "cd {cwd} && rm prompts/task.md && mkfifo prompts/task.md"},
        {"say": "Done."},
    ]
    first = scripted_run(box, "prompt-fifo-1", "", steps)
    assert first["status"] == "completed", first
    task = box.ws / "prompts" / "task.md"
    assert task.is_fifo()
    script = box.write(box.dir / "s2.json", '[{"say": "Done."}]')
    done = governor(box, ["run", "--json", "--policy", "edit-workspace", "--workspace", str(box.ws),
                          "--prompt-file", str(task), "--", python_of(box), str(SCRIPTED),
                          "--script", str(script)])  # fmt: skip
    outcome = outcome_of(done)
    assert outcome["status"] == "refused_before_start", outcome
    assert f"{task}: cannot read the prompt: it is not a regular file" in json.dumps(outcome)
