"""Escapes aimed at the placeholders of missing protected names (``governor.sandbox.run.stubs``).

As root (with ``CAP_LINUX_IMMUTABLE``) those placeholders are *sealed*: immutable
files with no pin mount; as the unprivileged user they are plain files pinned by a
read-only mount. Either way every change below must fail, seen from the host.
"""

from __future__ import annotations

from escape_harness import Box

EXCHANGE = (
    'python3 -c "import ctypes; l = ctypes.CDLL(None, use_errno=True); '
    "l.renameat2(-100, b'decoy', -100, b'{name}', 2)\""  # RENAME_EXCHANGE
)


def test_a_missing_names_placeholder_cannot_be_unsealed_swapped_linked_or_chmodded(
    box: Box,
) -> None:
    names = (".claude", ".mcp.json", ".envrc")
    attacks = "; ".join(
        f"chattr -i {n}; chmod 666 {n}; echo pwn > {n}; ln {n} {n}.hard; "
        f"echo decoy > decoy; {EXCHANGE.format(name=n)}; mv -f decoy {n}; "
        f"rm -f {n}; mkdir -p {n}/x && echo pwn > {n}/x/y"
        for n in names
    )
    outcome = box.run(attacks + "; echo ok > allowed.txt; cat README.md")
    assert outcome.error is None, outcome.error
    for name in names:
        assert not (box.ws / name).exists(), name  # no content, no folder, and no litter
        assert not (box.ws / f"{name}.hard").exists()
    assert (box.ws / "decoy").read_text() == "decoy\n"  # neighbour: writes next to them work
    assert (box.ws / "allowed.txt").read_text() == "ok\n"
    assert "hello" in outcome.text


PARSE = "python3 -c \"import json, sys; print('parsed', json.load(open(sys.argv[1])))\""


def test_a_json_placeholder_parses_inside_and_is_gone_from_the_host_afterwards(box: Box) -> None:
    outcome = box.run(f"{PARSE} .mcp.json; echo pwn > .mcp.json; cat .mcp.json")
    assert outcome.error is None, outcome.error
    assert "parsed {}" in outcome.text
    assert "pwn" not in outcome.text
    assert not (box.ws / ".mcp.json").exists()


def test_a_users_file_holding_exactly_a_placeholders_content_is_never_deleted(box: Box) -> None:
    """Existing before the run, it is pinned as the person's file, not taken for ours."""
    mine = box.write(box.ws / ".mcp.json", "{}\n")
    inode = mine.stat().st_ino
    outcome = box.run(f"{PARSE} .mcp.json; echo pwn > .mcp.json", then=f"{PARSE} .mcp.json")
    assert "parsed {}" in outcome.text
    assert mine.read_text() == "{}\n" and mine.stat().st_ino == inode
