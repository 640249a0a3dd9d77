"""What masking a secret's encodings costs on the message path, against masking
its literal text only, same run.

Every line an MCP server sends the agent goes through `Unsaid.line`, and every
record and event through `Masker.text`: both now mask each known secret's
base64 (standard and URL-safe, three alignments), hex (both cases) and
URL-encoded spellings (`governor.boundary.secrets.spellings`) besides its text, as one
trie-shaped pattern (`governor.boundary.secrets.alternation`). The baseline is what the
code did before: one flat alternation of the literal values (and, for
`Masker.text`, the token shapes after it, as before and now).

Texts: a 4 KB tool result and a 256 KB one (JSON text of ordinary words and a
base64 blob, no secret in it: the common case), masked with ``--secrets``
known values. Reported: microseconds per text, and the ratio new / literal.

    .venv/bin/python bench/masking.py [--secrets 8] [--reps 7]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from governor.boundary.secrets import _SHAPES, MASK, Masker  # noqa: E402
from governor.mcp.servers import Unsaid  # noqa: E402


def _texts() -> dict[str, str]:
    words = "the quick brown fox jumps over the lazy dog while the build runs its tests "
    blob = base64.b64encode(os.urandom(1024)).decode()
    small = json.dumps({"content": [{"type": "text", "text": (words * 40)[:3000] + blob[:1000]}]})
    large = json.dumps({"content": [{"type": "text", "text": (words * 2000)[:160_000] + blob * 90}]})
    return {"4 KB": small, "256 KB": large[:262_144]}


def _timed(fn: object, text: object, reps: int) -> float:
    runs = []
    for _ in range(reps):
        n, start = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - start) < 0.2:
            fn(text)  # type: ignore[operator]
            n += 1
        runs.append(elapsed / n)
    return statistics.median(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--secrets", type=int, default=8)
    parser.add_argument("--reps", type=int, default=7)
    args = parser.parse_args()
    values = [base64.urlsafe_b64encode(os.urandom(24)).decode() for _ in range(args.secrets)]
    literal = re.compile("|".join(map(re.escape, sorted(values, key=len, reverse=True))))
    literal_bytes = re.compile(literal.pattern.encode())
    masker, unsaid = Masker(values), Unsaid(values)
    for name, text in _texts().items():
        line = text.encode()
        old = _timed(lambda t: _SHAPES.sub(MASK, literal.sub(MASK, t)), text, args.reps)
        new = _timed(masker.text, text, args.reps)
        old_line = _timed(lambda b: literal_bytes.sub(MASK.encode(), b), line, args.reps)
        new_line = _timed(unsaid.line, line, args.reps)
        print(
            f"{name:>7}: Masker.text {new * 1e6:9.1f} us (literal only {old * 1e6:9.1f} us, "
            f"x {new / old:4.2f}); Unsaid.line {new_line * 1e6:9.1f} us "
            f"(literal only {old_line * 1e6:9.1f} us, x {new_line / old_line:4.2f})"
        )


if __name__ == "__main__":
    main()
