"""`governor agents install` for a Python agent: a real pip install of a small
pinned PyPI release into a venv of its own under a temporary data directory,
through the one door for host processes (`governor.sandbox.host.processes`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from governor.agents.npm_installs import LOCK, PYTHON_VARIABLE, InstallError, install, installed
from governor.agents.presets import Preset, Resolved, load_presets, resolve

SMALL = """
[cow]
name = "cowsay (small, pure Python, a console script, no dependencies)"
argv = ["cowsay"]
login = "nothing"
home = []
pypi = "cowsay"
version = "6.1"
python = "3.11"
"""


REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def data(tmp_path: Path) -> Iterator[Path]:
    """A data directory outside the temporary folders: the door refuses to run a
    program from one (anyone may write there), and the venv's python runs pip."""
    folder = REPO / ".agents-data" / uuid.uuid4().hex[:8]
    folder.mkdir(parents=True)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _cow(**changes: str) -> Preset:
    text = SMALL
    for key, value in changes.items():
        text = text.replace(f"{key} = ", f"{key} = {value!r}\n# ", 1)
    return load_presets(text.replace("'", '"'), source="test.toml")["cow"]


def _environ(**extra: str) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG")}
    return keep | {PYTHON_VARIABLE: sys.executable} | extra


def test_a_python_agent_gets_a_venv_of_its_own_at_its_pin_with_a_hashed_lock(
    data: Path,
) -> None:
    tmp_path = data
    said: list[str] = []
    done = install(_cow(), tmp_path, say=said.append, environ=_environ())
    assert done.version == "6.1" and done.current
    venv = tmp_path / "cow" / "venv"
    assert said[0].startswith(f"cow: installing cowsay==6.1 into {venv} (Python ")
    assert said[-1].startswith("cow: cowsay==6.1 installed in ")
    lock = (tmp_path / "cow" / LOCK).read_text().splitlines()
    assert [x for x in lock if not x.startswith("#")] == [
        next(x for x in lock if x.startswith("cowsay==6.1 --hash=sha256:"))
    ]
    found = resolve(_cow(), which=lambda name: None, installs=tmp_path)
    assert isinstance(found, Resolved) and found.via == "installed"
    assert found.argv == (str(venv / "bin" / "cowsay"),)
    ran = subprocess.run([*found.argv, "-t", "moo"], capture_output=True, text=True, check=False)
    assert ran.returncode == 0 and "moo" in ran.stdout, ran.stderr
    # there already: no interpreter is even looked for
    again = install(_cow(), tmp_path, say=said.append, which=lambda name: None, environ={})
    assert (
        again.version == "6.1"
        and said[-1] == f"cow: cowsay==6.1 is installed in {tmp_path / 'cow'}"
    )
    # a new pin is not that install: an update is due
    assert not installed(_cow(version="6.0"), tmp_path).current


def test_the_install_runs_nothing_from_the_caller_s_folder_nor_its_python_path(
    tmp_path: Path, data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``python -m venv`` and ``-m pip`` would import a ``venv.py`` or ``pip/``
    from the cwd (a workspace the governor was started in), and a
    ``sitecustomize`` from ``$PYTHONPATH``: the install runs from the
    governor's empty folder with the interpreter isolated (``-I``)."""
    marker = tmp_path / "ran"
    planted = tmp_path / "project"
    (planted / "pip").mkdir(parents=True)
    for name in ("venv.py", "pip/__init__.py", "pip/__main__.py", "sitecustomize.py"):
        (planted / name).write_text(f"open({str(marker)!r}, 'a').write({name!r})\n")
    monkeypatch.chdir(planted)
    done = install(_cow(), data, say=lambda line: None, environ=_environ(PYTHONPATH=str(planted)))
    assert done.current and not marker.exists(), marker.read_text()
    # the allowed neighbour: the same environment runs the planted code when not isolated
    subprocess.run(
        [sys.executable, "-c", "pass"], env=_environ(PYTHONPATH=str(planted)), check=True
    )
    assert marker.read_text() == "sitecustomize.py"


def test_a_release_needing_a_newer_python_than_any_found_is_refused_naming_them(
    tmp_path: Path,
) -> None:
    mine = "{}.{}".format(*sys.version_info[:2])
    with pytest.raises(InstallError) as e:
        install(_cow(python="3.99"), tmp_path, say=lambda line: None, environ=_environ())
    assert str(e.value) == (
        f"cow: cowsay==6.1 needs Python >= 3.99, and ${PYTHON_VARIABLE} has none "
        f"({sys.executable} ({mine})): set {PYTHON_VARIABLE} to one"
    )
    assert not (tmp_path / "cow" / "venv").exists()


def test_a_release_with_no_wheel_is_not_built_on_the_host(data: Path) -> None:
    """docopt 0.6.2 is published as a source archive only: building it would run
    its setup.py on the host. Wheels only: the install fails naming it."""
    docopt = load_presets(
        SMALL.replace('"cowsay"', '"docopt"').replace('"6.1"', '"0.6.2"'), source="t.toml"
    )["cow"]
    with pytest.raises(
        InstallError, match=r"^cow: pip install docopt==0\.6\.2 failed \(1\): .*docopt"
    ):
        install(docopt, data, say=lambda line: None, environ=_environ())
    assert installed(docopt, data).version is None


def test_a_venv_moved_from_where_it_was_made_counts_as_not_installed(data: Path) -> None:
    """Its console scripts name its python by absolute path: moved, they no
    longer start, so the install is made anew rather than taken as current."""
    install(_cow(), data / "here", say=lambda line: None, environ=_environ())
    (data / "here").rename(data / "there")
    assert installed(_cow(), data / "there").version is None
    again = install(_cow(), data / "there", say=lambda line: None, environ=_environ())
    assert again.current
    ran = subprocess.run([str(again.folder / "venv" / "bin" / "cowsay"), "-t", "moo"],
                         capture_output=True, text=True, check=False)  # fmt: skip
    assert ran.returncode == 0 and "moo" in ran.stdout, ran.stderr
