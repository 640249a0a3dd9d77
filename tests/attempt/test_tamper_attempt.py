"""A real `governor run --json` whose agent weakens a test with its own tool:
the outcome's findings name the file, the line and the rule, the summary says
so, and the attempt-end record holds them; an agent that fixes the code
instead leaves the findings empty."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

GOVERNOR = Path(sys.executable).parent / "governor"
SCRIPTED = Path(__file__).resolve().parents[1] / "audit" / "scripted_agent.py"

TEST = "from calc import add\n\n\ndef test_adds():\n    assert add(1, 2) == 3\n"
CODE = "def add(a, b):\n    return a - b\n"


def _run(tmp_path: Path, steps: list[object], *extra: str) -> subprocess.CompletedProcess[str]:
    ws = tmp_path / "ws"
    (ws / "tests").mkdir(parents=True)
    (ws / "tests" / "test_calc.py").write_text(TEST)
    (ws / "calc.py").write_text(CODE)
    (tmp_path / "p.toml").write_text('capability = "edit-workspace"\n')
    script = tmp_path / "script.json"
    script.write_text(json.dumps([*steps, {"say": "done"}]))
    argv = [str(GOVERNOR), "run", "--workspace", str(ws), "--policy", str(tmp_path / "p.toml")]
    argv += ["--no-sandbox-agent", "--log", str(tmp_path / "audit.jsonl"), *extra, "fix the test"]
    argv += ["--", sys.executable, str(SCRIPTED), "--script", str(script)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def test_an_agent_that_skips_the_failing_test_is_named_in_the_json_outcome(tmp_path: Path) -> None:
    weakened = TEST.replace("def test_adds", "import pytest\n\n\n@pytest.mark.skip\ndef test_adds")
    done = _run(tmp_path, [{"write": "{cwd}/tests/test_calc.py", "text": weakened}], "--json")
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    ws = tmp_path / "ws"
    assert outcome["findings"] == [
        {
            "path": str(ws / "tests" / "test_calc.py"),
            "line": 7,
            "rule": "skip-added",
            "detail": "pytest.mark.skip on test_adds",
        }
    ]
    assert any("tamper audit found 1 change(s)" in n for n in outcome["acp"]["notices"])
    end = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()][-1]
    assert end["kind"] == "attempt-end" and end["findings"] == outcome["findings"]


def test_an_agent_that_fixes_the_code_leaves_no_finding(tmp_path: Path) -> None:
    fixed = CODE.replace("a - b", "a + b")
    done = _run(tmp_path, [{"write": "{cwd}/calc.py", "text": fixed}], "--json")
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["findings"] == []
    assert not any("tamper" in n for n in outcome["acp"]["notices"])


def test_the_summary_a_person_reads_lists_the_deleted_test(tmp_path: Path) -> None:
    done = _run(tmp_path, [{"shell": "rm {cwd}/tests/test_calc.py"}])
    assert done.returncode == 0, done.stderr
    rows = [line.strip() for line in done.stdout.splitlines() if line.strip().startswith("tamper")]
    assert rows == [
        f"tamper  {tmp_path / 'ws' / 'tests' / 'test_calc.py'} test-file-deleted: the file held 1 test(s) (test_adds)"
    ], done.stdout
