"""The answers that print and exit come without an attempt's machinery (issue 26):
``governor --version``, ``--help``, every command's ``--help``, ``presets`` and
``check`` import neither the ACP schema nor pydantic, trio, structlog or the
sandbox's processes, and say exactly what they said when everything was imported.

What a command imports is read from the real console script run with
``PYTHONPROFILEIMPORTTIME=1``: the interpreter itself reports every module it
imports, whoever imports it, on stderr, without a wrapper in the way.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from governor.cli import COMMANDS

GOVERNOR = str(Path(sys.executable).parent / "governor")
ROOT = Path(__file__).resolve().parents[2]
POLICY = str(ROOT / "policies" / "edit-workspace.toml")

FORBIDDEN = (
    "acp", "pydantic", "trio", "structlog", "jsonrpcserver", "jsonschema",
    "governor.sandbox.run", "governor.sandbox.net", "governor.acp", "governor.attempt.lifecycle", "governor.job.spec",
)  # fmt: skip
"""The ACP schema package, its validation, the async runtime, the logs, the
sandbox's processes and the attempt: what only running an attempt needs."""

QUICK = [
    ["--version"],
    ["--help"],
    ["presets"],
    ["presets", "--json"],
    ["check", "--policy", POLICY],
    ["check", "--policy", POLICY, "--capability", "no-such"],
    ["agents", "list", "--help"],
    ["audit", "verify", "--help"],
    *([name, "--help"] for name in COMMANDS),
]

EAGER = """
import contextlib, io, json, sys
import trio, acp.schema, structlog
import governor.attempt.lifecycle, governor.confine.sandboxes, governor.sandbox.run.session, governor.sandbox.net.proxy
from governor.cli import COMMANDS, main
for name in COMMANDS:
    __import__(f"governor.cli.{name}")
said = []
for words in json.loads(sys.argv[1]):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(words)
        except SystemExit as e:
            code = e.code or 0
    said.append([code, out.getvalue(), err.getvalue()])
print(json.dumps(said))
"""
"""Each command run in one process that imported everything first, as every
command did before: the reference for what each should say."""


def environ(home: Path) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if not k.startswith("ACP_GOVERNOR_")}
    return {**keep, "HOME": str(home), "XDG_DATA_HOME": str(home / "data"), "COLUMNS": "100"}


def imported(
    words: list[str], env: dict[str, str]
) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """The console script's run and every module it imported."""
    done = subprocess.run(
        [GOVERNOR, *words],
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "PYTHONPROFILEIMPORTTIME": "1"},
    )
    lines = done.stderr.splitlines(keepends=True)
    modules = {
        line.rsplit("|", 1)[1].strip()
        for line in lines
        if line.startswith("import time:") and "[us]" not in line
    }
    done.stderr = "".join(line for line in lines if not line.startswith("import time:"))
    return done, modules


def forbidden(modules: set[str]) -> list[str]:
    return sorted(m for m in modules for f in FORBIDDEN if m == f or m.startswith(f + "."))


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("home")


@pytest.fixture(scope="module")
def reference(home: Path) -> dict[str, tuple[int, str, str]]:
    # the console script's own interpreter path: `presets` shows it (the demo agent's)
    python = Path(GOVERNOR).read_text(encoding="utf-8").splitlines()[0].removeprefix("#!")
    done = subprocess.run(
        [python, "-c", EAGER, json.dumps(QUICK)],
        capture_output=True,
        text=True,
        timeout=300,
        env=environ(home),
    )
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout)
    return {
        " ".join(words): (code, out, err)
        for words, (code, out, err) in zip(QUICK, said, strict=True)
    }


@pytest.mark.parametrize("words", QUICK, ids=" ".join)
def test_a_quick_answer_imports_no_attempt_machinery_and_says_what_it_always_said(
    words: list[str], reference: dict[str, tuple[int, str, str]], home: Path
) -> None:
    done, modules = imported(words, environ(home))
    assert "governor.cli" in modules, (
        "the probe saw nothing: PYTHONPROFILEIMPORTTIME was not honoured"
    )
    assert forbidden(modules) == []
    code, out, err = reference[" ".join(words)]
    assert (done.returncode, done.stdout, done.stderr) == (code, out, err)


def test_the_import_probe_sees_what_a_command_that_prepares_an_attempt_imports(
    tmp_path: Path,
) -> None:
    # refused before start, but only once the spec was prepared: trio, the schema
    done, modules = imported(
        ["run", "--timeout", "-5", "--workspace", str(tmp_path), "task", "--", "true"],
        environ(tmp_path),
    )
    assert done.returncode == 2, done.stderr
    assert "governor.job.spec" in forbidden(modules)
    assert "trio" in forbidden(modules)


def test_an_attempt_without_mcp_servers_imports_neither_the_mcp_sdk_nor_jsonrpcserver(
    tmp_path: Path,
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    demo = str(ROOT / "governor" / "agents" / "demo.py")
    argv = ["run", "--no-sandbox-agent", "--policy", POLICY, "--workspace", str(ws),
            "--log", str(tmp_path / "audit.jsonl"), "the task", "--", sys.executable, demo]  # fmt: skip
    done, modules = imported(argv, environ(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "acp.schema" in modules and "governor.attempt.lifecycle" in modules
    unneeded = ("mcp", "jsonrpcserver", "jsonschema", "oslash", "http.server")
    assert sorted(m for m in modules for u in unneeded if m == u or m.startswith(u + ".")) == []
