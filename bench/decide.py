"""Decisions per second for a 50-rule policy over a mixed corpus.

Baseline, measured in the same run: one `json.loads` of a typical ACP
`session/request_permission` line. Targets (issue 2): a median decision under
20 microseconds for paths and tool kinds, under 100 microseconds for a compound
command. Run: `.venv/bin/python bench/decide.py`.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable

from governor.policies.actions import ReadFile, RunCommand, ToolPermission, WriteFile
from governor.policies.decide import decide
from governor.policies.policy import parse_policy
from governor.policies.shell import _split_cached

WS = "/work/app"

POLICY = parse_policy(
    'capability = "edit-workspace"\n'
    "[deny]\n"
    f"commands = {json.dumps([f'tool{i} --danger *' for i in range(14)] + ['rm *', 'sudo *', 'git push *', 'dd *', 'mkfs *'])}\n"
    f"paths = {json.dumps([f'secret{i}/**' for i in range(6)])}\n"
    "[ask]\n"
    f"commands = {json.dumps([f'deploy{i} *' for i in range(8)])}\n"
    'writes = ["*.lock", "**/*.pem"]\n'
    'tools = ["fetch"]\n'
    "[allow]\n"
    f"commands = {json.dumps([f'build{i} *' for i in range(10)] + ['git status', 'pytest *'])}\n"
    'paths = ["docs/**", "src/**"]\n',
    "bench.toml",
).bind(WS)

RULE_COUNT = sum(
    len(t.commands) + len(t.paths.patterns) + len(t.writes.patterns) + len(t.tools)
    for _, t in POLICY.rules.tiers()
)

PERMISSION_LINE = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "session/request_permission",
        "params": {
            "sessionId": "8f14e45f-ceea-467f-a0e6-2b1b3c1c2c1d",
            "toolCall": {
                "toolCallId": "toolu_01ABCDEF",
                "title": "Write src/app.py",
                "kind": "edit",
                "status": "pending",
                "rawInput": {"file_path": f"{WS}/src/app.py", "content": "print('hi')\n" * 20},
                "locations": [{"path": f"{WS}/src/app.py"}],
            },
            "options": [
                {"optionId": "allow_always", "name": "Always Allow", "kind": "allow_always"},
                {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
                {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
            ],
        },
    },
    separators=(",", ":"),
)

PATHS = [
    ReadFile(f"{WS}/src/main.py"),
    ReadFile(f"{WS}/secret3/key"),
    ReadFile("/etc/passwd"),
    WriteFile(f"{WS}/src/app/models/user.py"),
    WriteFile(f"{WS}/.git/hooks/pre-commit"),
    WriteFile(f"{WS}/poetry.lock"),
    WriteFile(f"{WS}/docs/index.md"),
]
TOOLS = [
    ToolPermission("fetch", "Fetch https://example.com", {"url": "https://example.com"}),
    ToolPermission("think", "Thinking"),
    ToolPermission("edit", "Write src/app.py", {"file_path": f"{WS}/src/app.py", "content": "x"}),
    ToolPermission("switch_mode", "Exit plan mode"),
]
COMMANDS = [
    RunCommand("cd src && pytest -q 2>&1 | tail -5", WS),
    RunCommand("git status && git diff --stat; ls -la | grep py > files.txt", WS),
    RunCommand("find . -name '*.pyc' -exec rm {} \\; && echo done", WS),
    RunCommand("bash -c 'build3 --release && echo $(date) >> build.log'", WS),
    RunCommand('for f in *.py; do python -m py_compile "$f" || exit 1; done', WS),
]


def median_us(fn: Callable[[], object], rounds: int = 7, inner: int = 2000) -> float:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter_ns()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter_ns() - start) / inner / 1000)
    return statistics.median(samples)


def per_item(actions: list, *, cold: bool) -> float:
    def one_pass() -> None:
        if cold:
            _split_cached.cache_clear()
        for a in actions:
            decide(a, POLICY)

    return median_us(one_pass, inner=400) / len(actions)


def main() -> None:
    baseline = median_us(lambda: json.loads(PERMISSION_LINE))
    rows = [
        ("paths", per_item(PATHS, cold=False), 20.0),
        ("tool kinds / permission requests", per_item(TOOLS, cold=False), 20.0),
        ("compound commands (parse cache cold)", per_item(COMMANDS, cold=True), 100.0),
        ("compound commands (parse cache warm)", per_item(COMMANDS, cold=False), 100.0),
    ]
    print(
        f"policy: {RULE_COUNT} rules; baseline json.loads of one permission request: {baseline:.2f} us"
    )
    print(
        f"{'corpus':40} {'median us':>10} {'decisions/s':>12} {'x json.loads':>12} {'target us':>10}"
    )
    for name, us, target in rows:
        ok = "ok" if us < target else "OVER"
        print(f"{name:40} {us:10.2f} {1e6 / us:12,.0f} {us / baseline:12.2f} {target:8.0f} {ok}")


if __name__ == "__main__":
    main()
