"""Redirects: the files one redirect reads and writes, and the words the grammar hung on it.

A redirect gives a pair of path tuples, reads and writes (`_Redirects`); the
walker merges a command's pairs (`_merge`) and moves a pair the grammar hung
on a whole list or pipeline to its rightmost command. tree-sitter-bash hangs
on a redirect what is not its own: statements after a heredoc (`cat <<EOF |
grep x`), words after one (`cat <<EOF -`), extra targets (`rm > /dev/null -rf
/`), and it drops a lone `-` before one; `_RedirectReader` hands each back to
the walker, and `_gap` judges the text between two tokens. A path known only at
run time, or a redirect it cannot read, is an unknown reason.
"""

from __future__ import annotations

from tree_sitter import Node

from governor.policies.shell.grammar import (
    _EXPANSIONS,
    _READ_OPS,
    _STATEMENTS,
    _WRITE_OPS,
)
from governor.policies.shell.word_nodes import _WordReader
from governor.policies.shell.words import (
    _PLAIN,
    _blank,
    _not_a_file,
    _quoted_delimiter,
    _short,
)

_Redirects = tuple[tuple[str, ...], tuple[str, ...]]
_NO_REDIRECTS: _Redirects = ((), ())


def _merge(a: _Redirects, b: _Redirects) -> _Redirects:
    if not b[0] and not b[1]:
        return a
    if not a[0] and not a[1]:
        return b
    return (a[0] + b[0], a[1] + b[1])


class _RedirectReader(_WordReader):
    """Reads the redirects of one parsed line; the base of the line's walker."""

    __slots__ = ()

    def _gap(self, end: int, start: int, args: list[Node | str]) -> None:
        """Check the text between two tokens of one command; rescue plain words the grammar lost.

        tree-sitter-bash drops a lone `-` before a heredoc (`python - <<EOF`) and can
        join two lines into one command: anything but blanks between two tokens is
        either such a plain word, which is put back, or a misread, which is unknown.
        """
        gap = self._src[end:start]
        if _blank(gap):
            return
        words = gap.replace(b"\\\n", b" ").split(b" ")
        if b"\n" in gap or any(w.translate(None, _PLAIN) for w in words):
            self.unknown.append("the parser skipped part of the line")
            return
        args.extend(w.decode("ascii") for w in words if w)

    def _redirect(
        self, node: Node, subs: list[Node], after: list[Node], args: list[Node | str]
    ) -> _Redirects:
        """Reads and writes of one redirect.

        Its substitutions go to `subs`, statements the grammar hung under a heredoc
        (`cat <<EOF | grep x`, `cat <<EOF && ls`) to `after`, and words it hung there
        (`cat <<EOF -`) to `args`.
        """
        kind = node.type
        if kind == "file_redirect":
            return self._file_redirect(node, subs, args)
        if kind == "herestring_redirect":
            content = node.named_children
            if content:
                src = self._src
                first, last = content[0], content[-1]
                nxt = src[last.end_byte : last.end_byte + 1]
                gap = src[node.start_byte + 3 : first.start_byte]
                if not _blank(gap) or (last.type == "number" and nxt in (b"<", b">")):
                    self.unknown.append("the line does not parse as shell near '<<<'")
            subs.extend(self._substitutions(node))
            return _NO_REDIRECTS
        result: _Redirects = _NO_REDIRECTS
        quoted = False
        end = -1
        for i, child in enumerate(node.children):
            ckind = child.type
            if ckind != "heredoc_body" and ckind != "heredoc_end" and end >= 0:
                self._gap(end, child.start_byte, args)
            end = child.end_byte
            if not child.is_named:
                continue
            if node.field_name_for_child(i) == "argument":
                args.append(child)
            elif ckind == "heredoc_start":
                quoted = _quoted_delimiter(self._text(child))
            elif ckind == "file_redirect":
                result = _merge(result, self._file_redirect(child, subs, args))
            elif ckind == "heredoc_body":
                if not quoted:
                    self._heredoc_body(child, subs)
            elif ckind in _STATEMENTS:
                after.append(child)
        return result

    def _heredoc_body(self, node: Node, subs: list[Node]) -> None:
        text = self._src[node.start_byte : node.end_byte]
        if b"$(" in text or b"`" in text:
            covered = [
                (c.start_byte - node.start_byte, c.end_byte - node.start_byte)
                for c in node.named_children
                if c.type in _EXPANSIONS
            ]
            i, n = 0, len(text)
            while i < n:
                ch = text[i]
                if ch == 0x5C:  # backslash
                    i += 2
                    continue
                opens = ch == 0x60 or (ch == 0x24 and text[i + 1 : i + 2] == b"(")
                if opens and not any(lo <= i < hi for lo, hi in covered):
                    self.unknown.append(
                        "a here-document body runs a command substitution the splitter could not read"
                    )
                    break
                i += 1
        subs.extend(self._substitutions(node))

    def _file_redirect(self, node: Node, subs: list[Node], args: list[Node | str]) -> _Redirects:
        op = ""
        op_end = -1
        dest: Node | None = None
        for child in node.children:
            if not child.is_named:
                op = child.type
                op_end = child.end_byte
            elif child.type == "file_descriptor":
                continue
            elif dest is None:
                dest = child
            else:
                # tree-sitter-bash reads `rm > /dev/null -rf /` as three destinations;
                # bash writes the first and passes the rest to the command.
                args.append(child)
        if dest is None:
            return _NO_REDIRECTS
        src = self._src
        after = src[dest.end_byte : dest.end_byte + 1]
        if not _blank(src[op_end : dest.start_byte]) or (
            dest.type == "number" and after in (b"<", b">")
        ):
            # `< <newline> x` and `>> 2>&1`: bash refuses both, tree-sitter guesses.
            self.unknown.append(f"the line does not parse as shell near {op!r}")
        dest_kind = dest.type
        if dest_kind == "number" and (op == ">&" or op == "<&"):
            return _NO_REDIRECTS  # `2>&1`: a duplicated descriptor, no file
        if dest_kind == "process_substitution":
            subs.append(dest)
            return _NO_REDIRECTS
        path, dyn = self._word(dest, subs)
        if op in ("<&", ">&") and path == "-":
            return _NO_REDIRECTS
        if _not_a_file(path):
            return _NO_REDIRECTS
        if dyn or path.startswith("~"):
            self.unknown.append(f"a redirect to a path not known until run time: {_short(path)}")
        if op in _WRITE_OPS:
            return ((), (path,))
        if op in _READ_OPS:
            return ((path,), ())
        self.unknown.append(f"a redirect the splitter does not read: {_short(self._text(node))}")
        return _NO_REDIRECTS
