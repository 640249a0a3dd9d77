"""The tally's words are defined once (`governor.audit.tally.WORDS`) and
said the same way wherever a person reads them: `governor audit --help` and
the README's table."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from governor.audit.tally import WORDS, Tally

GOVERNOR = str(Path(sys.executable).parent / "governor")
ROOT = Path(__file__).resolve().parents[2]


def flat(text: str) -> str:
    return " ".join(text.split())


def test_every_count_of_the_tally_has_one_definition_in_its_order() -> None:
    assert list(WORDS) == list(Tally.__dataclass_fields__)


def test_governor_audit_help_defines_every_word_of_the_tally(tmp_path: Path) -> None:
    done = subprocess.run(
        [GOVERNOR, "audit", "--help"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    shown = flat(done.stdout)
    assert "the tally's words:" in shown
    for word, text in WORDS.items():
        assert f"{word} {flat(text)}" in shown, word


def test_the_readme_defines_the_tally_with_the_same_sentences() -> None:
    rows = dict(re.findall(r"^\| `(\w+)` \| (.+) \|$", (ROOT / "README.md").read_text(), re.M))
    for word, text in WORDS.items():
        assert rows.get(word) == text, f"the README's row for `{word}` differs from WORDS"


def test_docs_audit_defines_every_by_word_as_policies_by_does() -> None:
    from governor.policies import by

    rows = dict(re.findall(r"^\| `(\w+)` \| (.+) \|$", (ROOT / "docs" / "audit.md").read_text(), re.M))
    for word, text in by.WORDS.items():
        assert rows.get(word) == text, f"docs/audit.md's row for by `{word}` differs from by.WORDS"
