"""`governor check`: exit 0 when the policy fits, exit 2 with every violation, one per line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

GOVERNOR = str(Path(sys.executable).parent / "governor")
ROOT = Path(__file__).resolve().parents[2]


def check(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k != "ACP_GOVERNOR_CEILING"}
    return subprocess.run(
        [GOVERNOR, "check", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**base, **(env or {})},
    )


def test_a_shipped_policy_fits_the_default_ceiling_and_says_which_ceiling(tmp_path: Path) -> None:
    done = check(
        "--policy", str(ROOT / "policies" / "edit-workspace.toml"), env={"HOME": str(tmp_path)}
    )
    assert done.returncode == 0, done.stderr
    assert "ceiling: built-in default" in done.stdout
    assert "fits: capability edit-workspace" in done.stdout


def test_a_policy_over_the_ceiling_lists_every_violation_one_per_line(tmp_path: Path) -> None:
    policy = tmp_path / "p.toml"
    policy.write_text('capability = "full-access"\nnetwork = true\n')
    ceiling = tmp_path / "c.toml"
    ceiling.write_text('max_capability = "read-only"\nallowed_agents = ["codex"]\n')
    done = check("--policy", str(policy), "--ceiling", str(ceiling), "--agent", "claude")
    assert done.returncode == 2
    violations = [line for line in done.stderr.splitlines() if line.startswith("violation: ")]
    assert violations == [
        "violation: agent claude is not permitted; permitted agents: codex",
        "violation: requested capability full-access exceeds the permitted maximum read-only",
        "violation: network for commands was requested and the ceiling does not permit it",
    ]


def test_the_ceiling_comes_from_the_environment_before_the_default(tmp_path: Path) -> None:
    ceiling = tmp_path / "c.toml"
    ceiling.write_text('max_capability = "read-only"\nallowed_agents = ["demo"]\n')
    done = check(
        "--policy", str(ROOT / "policies" / "ci.toml"), env={"ACP_GOVERNOR_CEILING": str(ceiling)}
    )
    assert done.returncode == 2
    assert f"ceiling: {ceiling} ($ACP_GOVERNOR_CEILING)" in done.stdout


def test_a_missing_named_ceiling_or_a_bad_policy_is_one_clear_line(tmp_path: Path) -> None:
    done = check("--ceiling", str(tmp_path / "none.toml"))
    assert (
        done.returncode == 2 and "does not exist" in done.stderr and "Traceback" not in done.stderr
    )
    bad = tmp_path / "bad.toml"
    bad.write_text('[allow]\ntools = ["exec"]\n')
    done = check("--policy", str(bad))
    assert done.returncode == 2 and "did you mean `execute`?" in done.stderr


def test_limits_over_the_ceiling_s_maxima_are_violations_too(tmp_path: Path) -> None:
    policy = tmp_path / "p.toml"
    policy.write_text('[limits]\nmemory = "16G"\nprocesses = 64\n')
    ceiling = tmp_path / "c.toml"
    ceiling.write_text('max_memory = "8G"\nmax_processes = 512\n')
    done = check("--policy", str(policy), "--ceiling", str(ceiling))
    assert done.returncode == 2
    violations = [line for line in done.stderr.splitlines() if line.startswith("violation: ")]
    assert violations == [
        "violation: limits.memory = 16G exceeds the permitted maximum 8G (max_memory)"
    ]
