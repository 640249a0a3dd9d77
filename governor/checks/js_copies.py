"""Which ``node:test`` tests a copies' run can copy, and the literal a copy
changes (`governor.checks.canaries`, whose `_js_mutants` makes the copies):
a plain ``test('...', () => {`` whose first equality the copier can follow
compares what it computes with a literal on a line of its own, through a
helper of the file, or through a name bound to a literal (`_js_expected`).
Read line by line with patterns, not parsed: what they do not match is not
copied (never guessed). Pure: text in, places out."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

_JS_OPEN: Final = re.compile(
    r"""^(?P<indent>[ \t]*)(?:test|it)\(\s*(?P<q>['"])(?P<name>(?:(?!(?P=q))[^\\])+)(?P=q)"""
    r"""\s*,\s*(?:async\s*)?(?:\(\s*\w*\s*\)|\w+)\s*=>\s*\{\s*$"""
)
"""The first line of a ``node:test`` test written plainly: ``test('name', () => {``
(no options object: a ``{ skip }`` or ``{ todo }`` test is not copied)."""
_JS_LITERAL: Final = r"""-?\d+(?:\.\d+)?|'[^'\\\n]*'|"[^"\\\n]*"|true|false"""
_JS_EQUAL: Final = re.compile(
    r"^(?P<head>\s*\w+\.(?:deepStrictEqual|deepEqual|strictEqual|equal)\((?P<actual>.+),\s*)"
    rf"(?P<literal>{_JS_LITERAL})(?P<tail>\s*\);?\s*)$"
)
"""An ``assert`` equality of what a test computes with a literal, on a line of its own."""
_JS_ENDS_EARLY: Final = re.compile(r"\b(?:return|throw|try|if|for|while|switch|skip|todo)\b|\?")


_JS_EXPECTED_NAME: Final = re.compile(
    r"^\s*\w+\.(?P<family>deepStrictEqual|deepEqual|strictEqual|equal)\((?P<actual>.+),\s*"
    r"(?P<name>[A-Za-z_$][\w$]*)\s*\);?\s*$"
)
"""An ``assert`` equality of what a test computes with a name (a helper's
parameter, a name bound to a literal), on a line of its own."""
_JS_HELPER: Final = re.compile(
    r"^function\s+(?P<name>[A-Za-z_$][\w$]*)\s*\((?P<params>[\w$\s,]*)\)\s*\{\s*$"
)
"""A helper written plainly at the top level: ``function check(xs, want) {``."""
_JS_CALL: Final = re.compile(
    r"^(?P<head>\s*(?P<name>[A-Za-z_$][\w$]*)\()(?P<args>.*)(?P<tail>\);?\s*)$"
)
_JS_CONST: Final = re.compile(
    rf"^(?P<head>\s*(?:const|let|var)\s+(?P<name>[A-Za-z_$][\w$]*)\s*=\s*)"
    rf"(?P<literal>{_JS_LITERAL})(?P<tail>\s*;?\s*)$"
)
"""A name bound to a literal on a line of its own: ``const want = 3;``."""


def _js_words(text: str) -> set[str]:
    return set(re.findall(r"[A-Za-z_$][\w$]*", text))


def _js_helpers(lines: Sequence[str]) -> dict[str, tuple[int, int, str]]:
    """Helpers of the file whose first use of one parameter is the expected
    side of an equality: name -> (how many parameters, that one's place,
    the equality's family). Nothing before it in the helper returns, throws,
    branches or uses that parameter, and the computed side does not name it."""
    out: dict[str, tuple[int, int, str]] = {}
    for i, line in enumerate(lines):
        opened = _JS_HELPER.match(line.rstrip("\n"))
        if opened is None:
            continue
        params = [p.strip() for p in opened.group("params").split(",") if p.strip()]
        used: set[str] = set()
        for body in lines[i + 1 :]:
            if body.startswith("}"):
                break
            equal = _JS_EXPECTED_NAME.match(body.rstrip("\n"))
            if equal is not None and equal.group("name") in params:
                name = equal.group("name")
                if name not in used and name not in _js_words(equal.group("actual")):
                    out[opened.group("name")] = (
                        len(params),
                        params.index(name),
                        equal.group("family"),
                    )
                break
            if _JS_ENDS_EARLY.search(body):
                break
            used |= _js_words(body)
    return out


def _js_arguments(text: str) -> list[tuple[int, int]] | None:
    """Where each argument of a call's argument list is (start, end), split at
    the commas outside brackets and quotes; None for what is not read here."""
    spans: list[tuple[int, int]] = []
    depth, start, quote = 0, 0, ""
    for k, ch in enumerate(text):
        if quote:
            if ch == "\\":
                return None
            if ch == quote:
                quote = ""
        elif ch in "'\"`":
            if ch == "`":
                return None
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth < 0:
                return None
        elif ch == "," and depth == 0:
            spans.append((start, k))
            start = k + 1
    if quote or depth:
        return None
    spans.append((start, len(text)))
    return spans


def _js_expected(
    body: Sequence[str], helpers: dict[str, tuple[int, int, str]]
) -> tuple[int, str, str, str, str, str] | None:
    """In a plain test's body, the first line whose literal reaches the expected
    side of an equality: (its place, the text before the literal, the
    literal, the text after, the family, the question: the computed side, or
    a helper's name and its other arguments). An equality with a literal on its
    own line, a call of a helper (`_js_helpers`) with a literal in the
    expected parameter's place, or ``const want = 3;`` whose name is next used
    as an equality's expected side; nothing before that returns, throws,
    branches or skips."""
    bound: dict[str, tuple[int, str, str, str]] = {}  # name -> (line, head, literal, tail)
    for j, line in enumerate(body):
        text = line.rstrip("\n")
        equal = _JS_EQUAL.match(text)
        if equal is not None:
            family = equal.group("head").strip().split("(")[0].rpartition(".")[2]
            question = equal.group("actual").strip()
            return (
                j,
                equal.group("head"),
                equal.group("literal"),
                equal.group("tail"),
                family,
                question,
            )
        named = _JS_EXPECTED_NAME.match(text)
        if (
            named is not None
            and named.group("name") in bound
            and named.group("name") not in _js_words(named.group("actual"))
        ):
            at, head, literal, tail = bound[named.group("name")]
            return at, head, literal, tail, named.group("family"), named.group("actual").strip()
        call = _JS_CALL.match(text)
        if call is not None and call.group("name") in helpers:
            count, place, family = helpers[call.group("name")]
            spans = _js_arguments(call.group("args"))
            if spans is not None and len(spans) == count:
                a, b = spans[place]
                arg = call.group("args")[a:b]
                if re.fullmatch(_JS_LITERAL, arg.strip()):
                    lead = len(arg) - len(arg.lstrip())
                    head = call.group("head") + call.group("args")[: a + lead]
                    tail = call.group("args")[a + lead + len(arg.strip()) :] + call.group("tail")
                    asked = [call.group("args")[x:y].strip() for x, y in spans if (x, y) != (a, b)]
                    question = f"{call.group('name')}({', '.join(asked)})"
                    return j, head, arg.strip(), tail, family, question
        const = _JS_CONST.match(text)
        if const is not None:
            bound[const.group("name")] = (
                j,
                const.group("head"),
                const.group("literal"),
                const.group("tail"),
            )
            continue
        if _JS_ENDS_EARLY.search(line):
            return None
        bound = {k: v for k, v in bound.items() if k not in _js_words(text)}
    return None


def _js_sites(text: str) -> list[tuple[int, str, str, str, str, str, str]]:
    """The ``node:test`` tests of ``text`` that can be copied (`_js_expected`):
    (the line whose literal a copy changes, the test's name, the text before
    the literal, the literal, the text after, the equality's family, the
    question it asks: what it computes, with a helper's other arguments)."""
    lines = [line for line in re.split(r"(?<=\n)", text) if line]
    helpers = _js_helpers(lines)
    sites: list[tuple[int, str, str, str, str, str, str]] = []
    for i, line in enumerate(lines):
        opened = _JS_OPEN.match(line.rstrip("\n"))
        if opened is None:
            continue
        close = opened.group("indent") + "})"
        end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith(close)), None)
        if end is None:
            continue
        found = _js_expected(lines[i + 1 : end], helpers)
        if found is not None:
            at, head, literal, tail, family, question = found
            sites.append((i + 1 + at, opened.group("name"), head, literal, tail, family, question))
    return sites
