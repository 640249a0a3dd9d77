"""The README and docs/ stay whole: every internal link resolves (its file and
its anchor), and docs/cli.md lists every option the real parser knows, each
in its command's section (the options read from `governor ... --help`, the
console script a person runs)."""

from __future__ import annotations

import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GOVERNOR = str(Path(sys.executable).parent / "governor")
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

_FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6} (.+?)\s*#*$", re.M)


def prose(text: str) -> str:
    """The text without code blocks and code spans, where brackets are code."""
    return _CODE.sub("", _FENCE.sub("", text))


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped
    (hyphens and underscores kept), each space a hyphen."""
    text = heading.strip().lower().replace("`", "")
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    for heading in _HEADING.findall(_FENCE.sub("", page.read_text())):
        base, n = slug(heading), 1
        name = base
        while name in found:  # GitHub numbers a repeated heading: name-1, name-2
            name, n = f"{base}-{n}", n + 1
        found.add(name)
    return found


def links(page: Path) -> list[str]:
    return [t for t in _LINK.findall(prose(page.read_text())) if not re.match(r"[a-z]+:", t)]


def test_the_slug_is_githubs() -> None:
    assert slug("Events (`--events`)") == "events---events"
    assert slug("The governor's own install") == "the-governors-own-install"
    assert slug("Anchored and signed: intact is not authentic") == (
        "anchored-and-signed-intact-is-not-authentic"
    )


def test_the_readme_links_every_docs_page() -> None:
    linked = {Path(t.split("#")[0]).name for t in links(ROOT / "README.md") if t.startswith("docs/")}
    assert {p.name for p in (ROOT / "docs").glob("*.md")} <= linked


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_internal_link_resolves_to_a_file_and_its_anchor(page: Path) -> None:
    broken = []
    for target in links(page):
        path, _, anchor = target.partition("#")
        where = (page.parent / path).resolve() if path else page
        if not where.exists():
            broken.append(f"{target}: no such file")
        elif anchor and where.suffix == ".md" and anchor not in anchors(where):
            broken.append(f"{target}: no heading #{anchor} in {where.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_a_broken_anchor_is_found(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# A\n\n## Real one\n\nsee [b](#real-one), [c](#gone)\n")
    page = tmp_path / "a.md"
    assert links(page) == ["#real-one", "#gone"]
    assert anchors(page) == {"a", "real-one"}


COMMANDS = {
    "run": "run", "check": "check", "presets": "presets", "agents list": "agents",
    "sandbox": "sandbox", "audit": "audit", "audit verify": "audit verify",
    "audit replay": "audit replay", "audit report": "audit report", "batch": "batch",
    "approve": "approve", "resume": "resume",
}  # fmt: skip
"""Each command whose options docs/cli.md lists -> its section, ``## governor SECTION``."""

_OPTION = re.compile(r"^\s+(?:-\w(?: \S+)?, )?(--[a-z][a-z0-9-]*)", re.M)


def help_options(command: str) -> set[str]:
    done = subprocess.run(
        [GOVERNOR, *command.split(), "--help"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return set(_OPTION.findall(done.stdout)) - {"--help"}


def section(text: str, title: str) -> str:
    m = re.search(rf"^(#+) {re.escape(title)}\n(.*?)(?=^#{{1,3}} |\Z)", text, re.S | re.M)
    assert m is not None, f"docs/cli.md has no section {title!r}"
    return m.group(2)


def test_docs_cli_lists_every_option_of_every_command_in_its_section() -> None:
    text = (ROOT / "docs" / "cli.md").read_text()
    with ThreadPoolExecutor(max_workers=4) as pool:
        options = dict(zip(COMMANDS, pool.map(help_options, COMMANDS), strict=True))
    assert "--prompt-file" in options["run"] and "--fail-on" in options["run"]
    missing = {
        command: sorted(
            o for o in found if f"`{o}" not in section(text, f"governor {COMMANDS[command]}")
        )
        for command, found in options.items()
    }
    assert not any(missing.values()), f"options missing from docs/cli.md: {missing}"
