"""A word node's value, as bash would pass it, and the substitutions inside it.

`_WordReader` holds the line's source bytes and its unknown reasons, and reads
one node at a time: its text (`_text`, decoding as the grammar saw it), its
value after quote removal and whether that value is known only at run time
(`_word`), and the command and process substitutions it runs (`_substitutions`).
The walker and the redirect reader build on it (`redirects._RedirectReader`,
`walker._Walker`); a misread found here is an unknown reason, never a guess.
"""

from __future__ import annotations

from tree_sitter import Node

from governor.policies.shell.grammar import _LITERALS, _STATEMENTS, _SUBSTITUTIONS
from governor.policies.shell.words import (
    _ansi_c,
    _bare_blank,
    _short,
    _unescape_double,
    _unescape_unquoted,
)


class _WordReader:
    """Reads the words of one parsed line; the base of the line's walker."""

    __slots__ = ("_src", "unknown")

    def __init__(self, src: bytes) -> None:
        self._src = src
        self.unknown: list[str] = []

    def _text(self, node: Node) -> str:
        return self._decode(self._src[node.start_byte : node.end_byte])

    def _decode(self, raw: bytes) -> str:
        try:
            return raw.decode("utf-8", "surrogatepass")
        except UnicodeDecodeError:
            # The grammar saw the masked copy; a token edge inside a character is a misread.
            self.unknown.append("the parser split a character in two")
            return raw.decode("utf-8", "replace")

    def _substitutions(self, node: Node) -> list[Node]:
        """The command and process substitutions inside a word, in source order.

        A statement the grammar put inside a word is collected too: whatever it
        runs is then walked rather than hidden in a word's text.
        """
        if node.type in _SUBSTITUTIONS:
            return [node]
        found: list[Node] = []
        todo = list(reversed(node.named_children))
        while todo:
            n = todo.pop()
            kind = n.type
            if kind in _SUBSTITUTIONS or kind in _STATEMENTS:
                found.append(n)
            elif n.named_child_count:
                todo.extend(reversed(n.named_children))
        return found

    def _word(self, node: Node, subs: list[Node]) -> tuple[str, bool]:
        """A word's value after quote removal, and whether it is known only at run time."""
        text, dyn = self._part(node, subs)
        if not dyn:
            first = node
            while first.type == "concatenation" and first.named_child_count:
                first = first.named_children[0]
            if first.type == "word" and text.startswith("~"):
                dyn = True
            elif node.type == "concatenation" and "{" in text and "}" in text:
                # Brace expansion (`{a,b}`, `{1..3}`) turns one word into several.
                dyn = "," in text or ".." in text
        return text, dyn

    def _part(self, node: Node, subs: list[Node]) -> tuple[str, bool]:
        kind = node.type
        if kind == "word":
            text = self._text(node)
            if _bare_blank(text):
                # tree-sitter-bash reads `} }` as one word; bash splits at the blank.
                self.unknown.append(f"the parser read a blank inside a word: {_short(text)}")
            return _unescape_unquoted(text), False
        if kind == "raw_string":
            return self._text(node)[1:-1], False
        if kind == "string":
            return self._double_quoted(node, subs)
        if kind == "concatenation":
            pieces: list[str] = []
            dynamic = False
            for child in node.children:
                text, dyn = self._part(child, subs)
                pieces.append(text)
                dynamic = dynamic or dyn
            return "".join(pieces), dynamic
        if kind == "ansi_c_string":
            raw = self._text(node)
            decoded = _ansi_c(raw[2:-1])
            return (raw, True) if decoded is None else (decoded, False)
        if kind in _LITERALS:
            return self._text(node), False
        # Expansions and anything unforeseen: keep the source text, value unknown.
        subs.extend(self._substitutions(node))
        return self._text(node), True

    def _double_quoted(self, node: Node, subs: list[Node]) -> tuple[str, bool]:
        src = self._src
        pieces: list[str] = []
        dynamic = False
        pos = node.start_byte + 1
        end = node.end_byte - 1
        for child in node.named_children:
            if child.start_byte > pos:
                pieces.append(_unescape_double(self._decode(src[pos : child.start_byte])))
            if child.type == "string_content":
                pieces.append(_unescape_double(self._text(child)))
            else:
                pieces.append(self._text(child))
                subs.extend(self._substitutions(child))
                dynamic = True
            pos = child.end_byte
        if end > pos:
            pieces.append(_unescape_double(self._decode(src[pos:end])))
        return "".join(pieces), dynamic
