"""An attempt's `Ending` is written by one writer per part, each in one file
(`governor.ending.how_it_ended.PARTS`): who set a fact, and when, is read in that
file, never found with a grep. Every assignment to an `Ending`'s field anywhere
in `governor/` -- plain, augmented, annotated, or one target of several -- is
found here, and each must be in the file its part names.

An `Ending` is reached as ``end``, ``ending``, ``e`` or any ``<something>.end``
(``self.end``, ``gate.end``); that is how every module of ours names one."""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Iterator
from pathlib import Path

from governor.ending.how_it_ended import PARTS, Ending

ROOT = Path(__file__).resolve().parents[2]
NAMES = frozenset({"end", "ending", "e"})


def _targets(node: ast.AST) -> Iterator[ast.expr]:
    if isinstance(node, ast.Assign):
        for target in node.targets:
            yield from _unpacked(target)
    elif isinstance(node, ast.AugAssign | ast.AnnAssign):
        yield node.target


def _unpacked(target: ast.expr) -> Iterator[ast.expr]:
    if isinstance(target, ast.Tuple | ast.List):
        for element in target.elts:
            yield from _unpacked(element)
    elif isinstance(target, ast.Starred):
        yield from _unpacked(target.value)
    else:
        yield target


def _an_ending(value: ast.expr) -> bool:
    if isinstance(value, ast.Name):
        return value.id in NAMES
    return isinstance(value, ast.Attribute) and value.attr == "end"


def writes(source: str, fields: frozenset[str]) -> list[tuple[str, int]]:
    """Each (field, line) an `Ending`'s field is assigned at in `source`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        for target in _targets(node):
            if isinstance(target, ast.Attribute) and target.attr in fields and _an_ending(target.value):
                found.append((target.attr, target.lineno))
    return found


def test_every_field_of_an_ending_is_in_exactly_one_part_with_a_writer_that_exists() -> None:
    named = [field for _, _, part in PARTS for field in part]
    assert sorted(named) == sorted(f.name for f in dataclasses.fields(Ending))
    assert len(named) == len(set(named)), "a field in two parts has two writers"
    for _, writer, _ in PARTS:
        assert (ROOT / writer).is_file(), writer


def test_each_part_of_an_ending_is_written_only_in_its_writers_file() -> None:
    writer_of = {field: writer for _, writer, part in PARTS for field in part}
    fields = frozenset(writer_of)
    stray = []
    seen: set[str] = set()
    for path in sorted((ROOT / "governor").rglob("*.py")):
        if path.relative_to(ROOT).parts[1] in ("policies", "sandbox"):
            continue  # the links to the two packages below: no `Ending` there
        where = path.relative_to(ROOT).as_posix()
        for field, line in writes(path.read_text(encoding="utf-8"), fields):
            seen.add(field)
            if where != writer_of[field]:
                stray.append(f"{where}:{line}: {field} (written by {writer_of[field]})")
    assert not stray, "an Ending's field written outside its part's file:\n" + "\n".join(stray)
    # the scan sees the writers themselves (or it would pass by finding nothing)
    assert {"error", "pending", "stop_reason", "files_changed", "tally"} <= seen


def test_the_scan_finds_a_write_however_it_is_spelt() -> None:
    source = (
        "self.end.error = 'x'\n"
        "gate.end.blocked = r\n"
        "e.rejected_lines += 1\n"
        "end.model, end.alone = a, b\n"
        "ending.limit: str = 'l'\n"
        "self.turn.error = 'not an Ending'\n"
        "end.not_a_field = 1\n"
    )
    fields = frozenset(f.name for f in dataclasses.fields(Ending))
    assert writes(source, fields) == [
        ("error", 1), ("blocked", 2), ("rejected_lines", 3), ("model", 4), ("alone", 4), ("limit", 5),
    ]  # fmt: skip
