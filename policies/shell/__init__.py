"""Split a shell command line into the simple commands it would run.

Everything that decides what a line *is* lives here; nothing here decides
whether it may run. The policy engine asks every part, so the one hazard this
module must never commit is a silent omission: a construct it cannot read
becomes a plain-English reason in `Split.unknown` (the engine turns that into
`ask`), never a shorter list of commands that looks complete.

The line is parsed once with tree-sitter-bash and the tree is walked with an
explicit stack, so a long `a && b && c ...` chain cannot exhaust Python's
recursion limit. Wrappers that run another command (`sudo`, `env`, `xargs`,
`timeout`, `find -exec`, ...) are unwrapped, and shells given a script as a
string (`bash -c`, `eval`, `trap`) have that string parsed again, to a fixed
depth. The wrapper itself stays in the result so a rule such as `sudo *` can
still match it.

The grammar (tree-sitter-bash 0.25) misreads some lines; each misreading
found is either repaired, where bash's reading is certain, or made unknown:

- It binds a redirect after `a && b > out` to the whole list; bash binds it
  to `b`. The redirect is moved to the rightmost command.
- It reads `rm > /dev/null -rf /` as one redirect with three targets; bash
  writes the first and passes `-rf /` to `rm`. The extra words are put back.
- It drops a lone `-` before a heredoc (`python - <<EOF`) and hangs words
  after one on the redirect (`cat <<EOF -`). Both are put back.
- It joins two lines after a pipeline (`a | b | c<newline>d && e` gives a
  command `c d`). The command is split at the newline, as bash does.
- It parses command substitutions in an unquoted here-document only
  sometimes (never backticks). Any `$(` or backtick the tree does not cover
  is unknown.
- It accepts lines bash refuses (`done` or `}` as a command name, `;;`
  outside `case`, `} }` read as one word, text it silently skips). These are
  unknown; a property test holds this against `bash -n`.
- It segfaults on some code points above U+E0000. The parser is given a copy
  with every non-ASCII byte read as `x` (see `_ASCII_MASK`).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import tree_sitter_bash
from tree_sitter import Language, Node, Parser

__all__ = ["MAX_DEPTH", "MAX_LINE", "SimpleCommand", "Split", "split", "split_argv"]

MAX_DEPTH = 8
"""How many wrappers (`sudo`, `bash -c`, `env`, ...) may nest before a part is unknown."""

MAX_LINE = 1 << 20
"""The longest line split at all (Linux caps one argument at 128 KiB, a whole command at 2 MiB)."""

_CACHED_LENGTH = 4096


@dataclass(frozen=True, slots=True)
class SimpleCommand:
    """One command the line would run, as a person would name it.

    `argv` holds each word after quote removal (`'r''m'` is `rm`). A word whose
    value is only known at run time (`$X`, `$(...)`, backticks, `${...}`,
    arithmetic, a leading `~`, brace expansion) keeps its expansions as source
    text (`"$HOME/x"` is `$HOME/x`) and its index is in `dynamic`; glob
    characters are plain text. `assignments` names the `NAME=value` words before
    the command. `reads` and `writes` are the files its redirects open, as
    written, without `/dev/null`, `/dev/std*`, `/dev/tty`, `/dev/fd/N` or
    descriptor duplications (`2>&1`). `via` is the chain of wrappers that run
    it: `()` at top level, `("sudo", "bash -c")` for `sudo bash -c 'CMD'`.
    """

    argv: tuple[str, ...]
    dynamic: tuple[int, ...] = ()
    assignments: tuple[str, ...] = ()
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    via: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Split:
    """Every simple command of a line, and why the line cannot be judged if it cannot."""

    commands: tuple[SimpleCommand, ...]
    unknown: tuple[str, ...]

    @property
    def understood(self) -> bool:
        """True when every construct on the line was read; only then may it be allowed."""
        return not self.unknown


# ---------------------------------------------------------------- parser

_LOCAL = threading.local()


def _parser() -> Parser:
    """One parser per thread: a `Parser` keeps state between calls and is not shared."""
    parser: Parser | None = getattr(_LOCAL, "parser", None)
    if parser is None:
        parser = Parser(Language(tree_sitter_bash.language()))
        _LOCAL.parser = parser
    return parser


# ---------------------------------------------------------------- tables

_STATEMENTS = frozenset(
    {
        "command",
        "list",
        "pipeline",
        "subshell",
        "compound_statement",
        "redirected_statement",
        "negated_command",
        "variable_assignment",
        "variable_assignments",
        "declaration_command",
        "unset_command",
        "test_command",
        "if_statement",
        "while_statement",
        "for_statement",
        "c_style_for_statement",
        "case_statement",
        "function_definition",
    }
)
"""Node types that stand where a command may stand; anything else there is a word."""

_CLAUSES = frozenset({"do_group", "elif_clause", "else_clause", "case_item"})

_CHAINS = frozenset({"list", "pipeline", "negated_command"})
"""A redirect tree-sitter hangs on one of these belongs to its rightmost command."""

_SUBSTITUTIONS = frozenset({"command_substitution", "process_substitution"})

_EXPANSIONS = frozenset(
    {
        "simple_expansion",
        "expansion",
        "command_substitution",
        "process_substitution",
        "arithmetic_expansion",
        "brace_expression",
    }
)

_NOT_FILES = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/stdin", "/dev/tty"})

_WRITE_OPS = frozenset({">", ">>", "&>", "&>>", ">|", ">&"})
_READ_OPS = frozenset({"<", "<&"})
_REDIRECTS = frozenset({"file_redirect", "heredoc_redirect", "herestring_redirect"})

_HAZARD_NAMES = frozenset(
    {"PATH", "BASH_ENV", "ENV", "PROMPT_COMMAND", "SHELLOPTS", "BASHOPTS", "PS4"}
)
_HAZARD_PREFIXES = ("LD_", "DYLD_", "BASH_FUNC_")
"""Variables that change which program a name runs, or make a shell run code of their own."""

_SHELL_STATE = frozenset({"IFS"})
"""Harmless for the one command it prefixes (`IFS=, read a b`), not for every later word split."""

_ARITH_ASSIGN = frozenset({"=", "+=", "-=", "*=", "/=", "%=", "<<=", ">>=", "&=", "^=", "|="})

_SHELLS = frozenset({"bash", "sh", "zsh", "dash", "ksh", "mksh", "ash"})

_ANSI_C = {
    "a": "\a",
    "b": "\b",
    "e": "\x1b",
    "E": "\x1b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "?": "?",
}


def _hazardous(name: str, *, lasting: bool) -> bool:
    """Whether assigning `name` changes what commands run; `lasting` when it outlives one command."""
    return (
        name in _HAZARD_NAMES
        or name.startswith(_HAZARD_PREFIXES)
        or (lasting and name in _SHELL_STATE)
    )


def _short(text: str, limit: int = 40) -> str:
    """A construct quoted in a reason, cut short: reasons are logged, lines may hold secrets."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _line_break(gap: bytes) -> bool:
    """Blanks around an unescaped newline: where bash ends a command."""
    gap = gap.replace(b"\\\n", b"")
    return b"\n" in gap and not gap.translate(None, b" \t\r\n")


_MISPLACED = frozenset(
    {"if", "then", "else", "elif", "fi", "for", "select", "while", "until", "do", "done"}
    | {"case", "esac", "in", "function", "{", "}", "[[", "]]", ";;", "!"}
)
"""Reserved words that bash refuses as the first word of a command."""

_CASE_ENDS = frozenset({";;", ";&", ";;&"})


def _skipped(gap: bytes) -> bool:
    """Anything but blanks, newlines and line continuations between two statements."""
    return bool(gap.replace(b"\\\n", b"").translate(None, b" \t\r\n"))


def _blank(gap: bytes) -> bool:
    """Only spaces, tabs and line continuations: what may separate two words of a command."""
    return not gap.replace(b"\\\n", b"").translate(None, b" \t")


_PLAIN = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=+,@%"
"""Bytes of a word that means itself in any position: safe to put back when the grammar drops it."""


def _not_a_file(path: str) -> bool:
    return path in _NOT_FILES or (path.startswith("/dev/fd/") and path[8:].isdigit())


def _basename(word: str) -> str:
    return word.rsplit("/", 1)[-1]


# ---------------------------------------------------------------- quote removal


def _unescape(text: str, escapable: str | None) -> str:
    """Backslash removal: any character after a backslash (unquoted, ``escapable``
    None) or only those in ``escapable`` (inside double quotes); an escaped newline
    is a line continuation and vanishes."""
    if "\\" not in text:
        return text
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "\\" and i + 1 < n and (escapable is None or text[i + 1] in escapable):
            if text[i + 1] != "\n":
                out.append(text[i + 1])
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _unescape_unquoted(text: str) -> str:
    return _unescape(text, None)


def _bare_blank(text: str) -> bool:
    """A space, tab or newline not escaped by a backslash: a word boundary to bash."""
    if " " not in text and "\t" not in text and "\n" not in text:
        return False
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "\\":
            i += 2
            continue
        if ch in " \t\n":
            return True
        i += 1
    return False


def _unescape_double(text: str) -> str:
    return _unescape(text, '$`"\\\n')


def _ansi_c(body: str) -> str | None:
    """Decode the inside of `$'...'`; None when an escape is one this table does not know."""
    if "\\" not in body:
        return body
    out: list[str] = []
    i, n = 0, len(body)
    while i < n:
        ch = body[i]
        if ch != "\\" or i + 1 >= n:
            out.append(ch)
            i += 1
            continue
        nxt = body[i + 1]
        if nxt in _ANSI_C:
            out.append(_ANSI_C[nxt])
            i += 2
        elif nxt == "x":
            j = i + 2
            while j < n and j < i + 4 and body[j] in "0123456789abcdefABCDEF":
                j += 1
            if j == i + 2:
                return None
            out.append(chr(int(body[i + 2 : j], 16)))
            i = j
        elif nxt in "01234567":
            j = i + 1
            while j < n and j < i + 4 and body[j] in "01234567":
                j += 1
            out.append(chr(int(body[i + 1 : j], 8) & 0xFF))
            i = j
        else:
            return None
    return "".join(out)


def _quoted_delimiter(start: str) -> bool:
    return any(ch in start for ch in "'\"\\")


# ---------------------------------------------------------------- the walk

_Redirects = tuple[tuple[str, ...], tuple[str, ...]]
_NO_REDIRECTS: _Redirects = ((), ())


def _merge(a: _Redirects, b: _Redirects) -> _Redirects:
    if not b[0] and not b[1]:
        return a
    if not a[0] and not a[1]:
        return b
    return (a[0] + b[0], a[1] + b[1])


class _Walker:
    """Collects the parts of one parsed line; one instance per parse."""

    __slots__ = ("_args", "_extra", "_src", "_stack", "commands", "unknown", "via")

    def __init__(self, src: bytes, via: tuple[str, ...]) -> None:
        self._src = src
        self.via = via
        self.commands: list[SimpleCommand] = []
        self.unknown: list[str] = []
        self._extra: dict[int, _Redirects] = {}
        self._args: dict[int, list[Node | str]] = {}
        self._stack: list[tuple[Node, _Redirects] | SimpleCommand] = []

    # -- driving

    def run(self, root: Node) -> None:
        stack = self._stack
        extras = self._extra
        handlers = _HANDLERS
        stack.append((root, _NO_REDIRECTS))
        # Each node is visited once and each command emitted once; a walk that runs
        # past this is a bug, and a bug must end as `ask`, never as a hung governor.
        budget = 8 * len(self._src) + 64
        while stack:
            budget -= 1
            if budget < 0:
                self.unknown.append("internal splitter error: the walk did not finish")
                return
            item = stack.pop()
            if isinstance(item, SimpleCommand):
                self.emit(item)
                continue
            node, inherited = item
            if extras:
                extra = extras.pop(node.id, None)
                if extra is not None:
                    inherited = _merge(inherited, extra)
            handler = handlers.get(node.type)
            if handler is None:
                self.unknown.append(f"a shell construct the splitter does not read: {node.type}")
                continue
            handler(self, node, inherited)

    def _push_all(self, nodes: Sequence[Node], inherited: _Redirects) -> None:
        if nodes:
            self._stack.extend([(node, inherited) for node in reversed(nodes)])

    def _text(self, node: Node) -> str:
        return self._decode(self._src[node.start_byte : node.end_byte])

    def _decode(self, raw: bytes) -> str:
        try:
            return raw.decode("utf-8", "surrogatepass")
        except UnicodeDecodeError:
            # The grammar saw the masked copy; a token edge inside a character is a misread.
            self.unknown.append("the parser split a character in two")
            return raw.decode("utf-8", "replace")

    # -- statements

    def container(self, node: Node, inherited: _Redirects) -> None:
        """Walk each statement inside; words in between are searched for substitutions."""
        todo: list[Node] = []
        src = self._src
        end = node.start_byte
        for child in node.children:
            start = child.start_byte
            if start != end and _skipped(src[end:start]):
                # e.g. `\ #c` at the start of a line: the grammar keeps the comment, drops `\ `.
                self.unknown.append("the parser skipped part of the line")
            end = child.end_byte
            kind = child.type
            if not child.is_named:
                # tree-sitter-bash accepts `a ;; b` outside a case; bash refuses the line.
                if kind in _CASE_ENDS and node.type != "case_item":
                    self.unknown.append(f"{kind} outside a case statement")
                continue
            if kind in _STATEMENTS or kind in _CLAUSES or kind in _SUBSTITUTIONS or kind == "ERROR":
                if kind == "negated_command" and todo and node.type == "pipeline":
                    self.unknown.append("the line does not parse as shell: '!' inside a pipeline")
                todo.append(child)
            elif kind == "comment" or kind == "variable_name":
                continue
            else:
                todo.extend(self._substitutions(child))
        self._push_all(todo, inherited)

    def compound(self, node: Node, inherited: _Redirects) -> None:
        first = node.child(0)
        if first is not None and first.type == "((":
            self.arithmetic(node)
        else:
            self.container(node, inherited)

    def arithmetic(self, node: Node) -> None:
        todo = [node]
        while todo:
            n = todo.pop()
            kind = n.type
            if kind in _SUBSTITUTIONS:
                continue
            if kind == "postfix_expression" or (
                kind in ("unary_expression", "binary_expression")
                and any(c.type in _ARITH_ASSIGN or c.type in ("++", "--") for c in n.children)
            ):
                self.unknown.append(
                    f"arithmetic that changes shell variables: {_short(self._text(node))}"
                )
                break
            todo.extend(n.named_children)
        self._push_all(self._substitutions(node), _NO_REDIRECTS)

    def skip(self, node: Node, inherited: _Redirects) -> None:
        return

    def function_definition(self, node: Node, inherited: _Redirects) -> None:
        self.unknown.append(f"defines a shell function: {_short(self._text(node))}")
        body = node.child_by_field_name("body")
        if body is not None:
            self._stack.append((body, inherited))

    def for_statement(self, node: Node, inherited: _Redirects) -> None:
        var = node.child_by_field_name("variable")
        if var is not None and _hazardous(self._text(var), lasting=True):
            self.unknown.append(
                f"a loop assigns {self._text(var)}, which changes what later commands run"
            )
        self.container(node, inherited)

    def assignment(self, node: Node, inherited: _Redirects) -> None:
        """A bare `X=1`: no command runs, but the value's substitutions do."""
        targets = node.named_children if node.type == "variable_assignments" else [node]
        todo: list[Node] = []
        for target in targets:
            self._check_assignment(target)
            value = target.child_by_field_name("value")
            if value is not None:
                todo.extend(self._substitutions(value))
        if inherited[1] or inherited[0]:
            self.unknown.append("a redirect with no command")
        self._push_all(todo, _NO_REDIRECTS)

    def _check_assignment(self, node: Node, *, lasting: bool = True) -> str:
        name_node = node.child_by_field_name("name")
        name = self._text(name_node) if name_node is not None else self._text(node)
        if _hazardous(name, lasting=lasting):
            self.unknown.append(f"assigns {name}, which changes what later commands run")
        return name

    def redirected(self, node: Node, inherited: _Redirects) -> None:
        body = node.child_by_field_name("body")
        own: _Redirects = _NO_REDIRECTS
        subs: list[Node] = []
        after: list[Node] = []
        args: list[Node | str] = []
        end = -1 if body is None else body.end_byte
        for child in node.named_children:
            if child.type in _REDIRECTS:
                if end >= 0:
                    self._gap(end, child.start_byte, args)
                end = child.end_byte
                own = _merge(own, self._redirect(child, subs, after, args))
        # Pushed in reverse: what runs after the body (`cat <<EOF | grep x` hangs the
        # pipeline under the heredoc), the body, then the redirects' own substitutions.
        self._push_all(after, inherited)
        if body is None:
            self.unknown.append(f"a redirect with no command: {_short(self._text(node))}")
        elif body.type in _CHAINS and (own is not _NO_REDIRECTS or args):
            target = body
            while target.type in _CHAINS:
                parts = [c for c in target.named_children if c.type != "comment"]
                if not parts:
                    break
                target = parts[-1]
            self._extra[target.id] = _merge(self._extra.get(target.id, _NO_REDIRECTS), own)
            self._add_args(target, args)
            self._stack.append((body, inherited))
        else:
            self._add_args(body, args)
            self._stack.append((body, _merge(inherited, own)))
        self._push_all(subs, _NO_REDIRECTS)

    def _add_args(self, target: Node, args: list[Node | str]) -> None:
        """Words the grammar hung on a redirect (`cat <<EOF -`) belong to the command."""
        if not args:
            return
        if target.type == "command":
            self._args.setdefault(target.id, []).extend(args)
        else:
            self.unknown.append("words after a here-document that belong to no command")

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

    def command(self, node: Node, inherited: _Redirects) -> None:
        argv: list[str] = []
        dynamic: list[int] = []
        assignments: list[str] = []
        subs: list[Node] = []
        after: list[Node] = []
        done: list[SimpleCommand] = []
        redirects = inherited
        src = self._src
        end = -1
        named = broken = False
        # Words the grammar hung on redirects: inside this node, then on the statement around it.
        inline: list[Node | str] = []
        outer = self._args.pop(node.id, None) if self._args else None
        for child in node.children:
            start = child.start_byte
            if end >= 0 and (start != end + 1 or src[end] != 0x20):
                if named and _line_break(src[end:start]):
                    # tree-sitter-bash reads `a | b | c<newline>d && e` as a command `c d`;
                    # bash ends a command at the newline, so the rest is the next command.
                    done.append(self._simple(argv, dynamic, assignments, redirects))
                    argv, dynamic, assignments, redirects = [], [], [], inherited
                    broken = True
                else:
                    lost: list[Node | str] = []
                    self._gap(end, start, lost)
                    if lost and not named:
                        self.unknown.append("the parser skipped part of the line")
                    argv.extend(w for w in lost if isinstance(w, str))
            end = child.end_byte
            kind = child.type
            if kind == "command_name":
                named = True
                word = child.named_children[0] if child.named_child_count else child
                if word.is_missing:  # `ls &&` at the end of a line: already a parse error
                    self._push_all(after + subs, _NO_REDIRECTS)
                    return
                if inline:  # `> out a b`: words before the name belong after it
                    self.unknown.append("words the parser placed before the command name")
            elif not named:
                if kind == "variable_assignment":
                    assignments.append(self._check_assignment(child, lasting=False))
                    value = child.child_by_field_name("value")
                    if value is not None:
                        subs.extend(self._substitutions(value))
                elif kind in _REDIRECTS:
                    redirects = _merge(redirects, self._redirect(child, subs, after, inline))
                continue
            elif kind in _REDIRECTS:
                redirects = _merge(redirects, self._redirect(child, subs, after, inline))
                continue
            elif kind == "comment":
                continue
            elif kind in _STATEMENTS:
                # `time (a; b)` or bash's syntax error `echo (a)`: a group where a word goes.
                self.unknown.append(
                    f"a command group inside a command: {_short(self._text(child))}"
                )
                subs.append(child)
                continue
            else:
                word = child
            wkind = word.type
            if wkind == "word" or wkind == "number":  # the common case, off the general path
                raw = src[word.start_byte : word.end_byte]
                if raw.isalnum() or not raw.translate(None, _PLAIN):
                    argv.append(raw.decode("ascii"))
                    continue
            text, dyn = self._word(word, subs)
            if dyn:
                dynamic.append(len(argv))
            argv.append(text)
        for extra in inline if outer is None else inline + outer:
            if isinstance(extra, str):
                argv.append(extra)
                continue
            text, dyn = self._word(extra, subs)
            if dyn:
                dynamic.append(len(argv))
            argv.append(text)
        if not named:
            if redirects[0] or redirects[1]:
                self.unknown.append("a redirect with no command")
            self._push_all(after + subs, _NO_REDIRECTS)
            return
        done.append(self._simple(argv, dynamic, assignments, redirects))
        if broken:
            for part in done[1:]:
                if part.argv and "=" in part.argv[0]:  # `X=1` read as a command name
                    self.unknown.append(f"a line break the parser misread: {_short(part.argv[0])}")
        # Pushed in reverse: what the grammar hung after, the commands, their substitutions.
        stack = self._stack
        self._push_all(after, _NO_REDIRECTS)
        stack.extend(reversed(done))
        self._push_all(subs, _NO_REDIRECTS)

    def _simple(
        self,
        argv: list[str],
        dynamic: list[int],
        assignments: list[str],
        redirects: _Redirects,
    ) -> SimpleCommand:
        if not argv:
            self.unknown.append("the parser skipped part of the line")
        elif dynamic and dynamic[0] == 0:
            self.unknown.append(f"the command name is not known until run time: {_short(argv[0])}")
        elif argv[0] == "coproc":
            self.unknown.append("coproc runs a command in the background with its own pipes")
        elif argv[0] in _MISPLACED:
            # bash refuses `done`, `fi`, `}` ... where a command starts; tree-sitter runs them.
            self.unknown.append(f"the line does not parse as shell: unexpected {argv[0]!r}")
        return SimpleCommand(
            tuple(argv), tuple(dynamic), tuple(assignments), redirects[0], redirects[1], self.via
        )

    def declaration(self, node: Node, inherited: _Redirects) -> None:
        """`export X=1 Y`, `local`, `declare`, `readonly`, `unset`: a command named by its keyword."""
        subs: list[Node] = []
        argv: list[str] = []
        dynamic: list[int] = []
        for child in node.children:
            if not child.is_named:
                if not argv:
                    argv.append(child.type)
                continue
            if child.type == "variable_assignment":
                name = self._check_assignment(child)
                value = child.child_by_field_name("value")
                text, dyn = ("", False) if value is None else self._word(value, subs)
                if dyn:
                    dynamic.append(len(argv))
                argv.append(f"{name}={text}")
            elif child.type == "comment":
                continue
            else:
                text, dyn = self._word(child, subs)
                if dyn:
                    dynamic.append(len(argv))
                argv.append(text)
        if not argv:
            self.unknown.append(
                f"a declaration the splitter does not read: {_short(self._text(node))}"
            )
            return
        self._finish(tuple(argv), tuple(dynamic), (), inherited, subs)

    def test_command(self, node: Node, inherited: _Redirects) -> None:
        """`[ -f x ]`, `[[ $a == b ]]`: words in order, operators as written."""
        subs: list[Node] = []
        argv: list[str] = []
        dynamic: list[int] = []
        todo = [node]
        while todo:
            n = todo.pop()
            if n.type in _WORDISH:
                text, dyn = self._word(n, subs)
                if dyn:
                    dynamic.append(len(argv))
                argv.append(text)
            elif n.child_count and n.is_named:
                todo.extend(reversed(n.children))
            else:
                argv.append(self._text(n))
        self._finish(tuple(argv), tuple(dynamic), (), inherited, subs)

    def _finish(
        self,
        argv: tuple[str, ...],
        dynamic: tuple[int, ...],
        assignments: tuple[str, ...],
        redirects: _Redirects,
        subs: list[Node],
    ) -> None:
        command = SimpleCommand(argv, dynamic, assignments, redirects[0], redirects[1], self.via)
        # Substitutions run before the command that uses their output: push them on top.
        self._stack.append(command)
        self._push_all(subs, _NO_REDIRECTS)

    # -- redirects

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

    # -- words

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

    # -- emitting and unwrapping

    def emit(self, command: SimpleCommand) -> None:
        """Record a command, then whatever command it runs in its turn."""
        self.commands.append(command)
        if not command.argv or 0 in command.dynamic:
            return
        for name in command.assignments:
            if _hazardous(name, lasting=False):
                self.unknown.append(f"assigns {name}, which changes what later commands run")
        unwrap = _WRAPPERS.get(_basename(command.argv[0]))
        if unwrap is None:
            return
        inner = unwrap(command)
        if inner is None:
            return
        if isinstance(inner, str):
            self.unknown.append(inner)
            return
        if len(command.via) >= MAX_DEPTH:
            self.unknown.append(f"wrappers nested more than {MAX_DEPTH} deep")
            return
        if isinstance(inner, _Script):
            self._reparse(inner, command.via)
            return
        for clause in (inner,) if isinstance(inner, _Inner) else inner:
            self._emit_inner(command, clause)

    def _emit_inner(self, command: SimpleCommand, inner: _Inner) -> None:
        start = inner.start
        end = len(command.argv) if inner.end is None else inner.end
        argv = command.argv[start:end]
        if not argv:
            return
        dynamic = tuple(i - start for i in command.dynamic if start <= i < end)
        if inner.placeholder:
            dynamic = tuple(
                sorted(set(dynamic) | {i for i, w in enumerate(argv) if inner.placeholder in w})
            )
        if 0 in dynamic:
            self.unknown.append(
                f"{inner.label} runs a command whose name is not known until run time: {_short(argv[0])}"
            )
        elif inner.label == "time" and argv[0] in _MISPLACED:
            # `time` is a keyword: `time fi` is bash's syntax error, not a program named fi.
            self.unknown.append(f"the line does not parse as shell: unexpected {argv[0]!r}")
        self.emit(
            SimpleCommand(argv, dynamic, inner.assignments, (), (), (*command.via, inner.label))
        )

    def _reparse(self, script: _Script, via: tuple[str, ...]) -> None:
        if script.dynamic:
            self.unknown.append(
                f"{script.label} runs a script not known until run time: {_short(script.text)}"
            )
            return
        nested = _split_text(script.text, (*via, script.label))
        self.commands.extend(nested.commands)
        self.unknown.extend(f"inside {script.label}: {reason}" for reason in nested.unknown)


_HANDLERS: dict[str, Callable[[_Walker, Node, _Redirects], None]] = {
    "program": _Walker.container,
    "list": _Walker.container,
    "pipeline": _Walker.container,
    "subshell": _Walker.container,
    "negated_command": _Walker.container,
    "command_substitution": _Walker.container,
    "process_substitution": _Walker.container,
    "if_statement": _Walker.container,
    "elif_clause": _Walker.container,
    "else_clause": _Walker.container,
    "while_statement": _Walker.container,
    "c_style_for_statement": _Walker.container,
    "case_statement": _Walker.container,
    "case_item": _Walker.container,
    "do_group": _Walker.container,
    "for_statement": _Walker.for_statement,
    "compound_statement": _Walker.compound,
    "redirected_statement": _Walker.redirected,
    "command": _Walker.command,
    "declaration_command": _Walker.declaration,
    "unset_command": _Walker.declaration,
    "test_command": _Walker.test_command,
    "variable_assignment": _Walker.assignment,
    "variable_assignments": _Walker.assignment,
    "function_definition": _Walker.function_definition,
    "comment": _Walker.skip,
    # The parse failure is already a reason (see `_first_error`); what did parse is
    # still walked, so a deny rule can see it.
    "ERROR": _Walker.container,
}

_LITERALS = frozenset({"number", "extglob_pattern", "regex", "test_operator", "variable_name", "$"})

_WORDISH = frozenset(
    {
        "word",
        "string",
        "raw_string",
        "ansi_c_string",
        "concatenation",
        "number",
        "extglob_pattern",
        "regex",
        "test_operator",
    }
    | _EXPANSIONS
)


# ---------------------------------------------------------------- wrappers


@dataclass(frozen=True, slots=True)
class _Inner:
    """The wrapped command starts at `argv[start]`."""

    start: int
    label: str
    assignments: tuple[str, ...] = ()
    placeholder: str = ""
    end: int | None = None


@dataclass(frozen=True, slots=True)
class _Script:
    """The wrapper runs `text` as shell source."""

    text: str
    label: str
    dynamic: bool


_Unwrapped = _Inner | tuple[_Inner, ...] | _Script | str | None
"""What a wrapper runs: commands inside its argv, a script, a reason it is unknown, or nothing."""


@dataclass(frozen=True, slots=True)
class _Options:
    """The options a wrapper takes before the command it runs."""

    flags: str = ""
    with_arg: str = ""
    optional_arg: str = ""
    long_flags: frozenset[str] = frozenset()
    long_with_arg: frozenset[str] = frozenset()
    assignments: bool = False
    numeric: bool = False


@dataclass(slots=True)
class _Parsed:
    index: int
    seen: set[str]
    values: dict[str, str]
    assignments: list[str]


def _parse_options(command: SimpleCommand, spec: _Options) -> _Parsed | str:
    """Walk a wrapper's leading options; a reason string when one is not understood."""
    argv = command.argv
    name = _basename(argv[0])
    parsed = _Parsed(1, set(), {}, [])
    i, n = 1, len(argv)
    while i < n:
        word = argv[i]
        if i in command.dynamic and (word.startswith("-") or "=" in word or word.startswith("$")):
            return f"{name} has an option not known until run time: {_short(word)}"
        if word == "--":
            i += 1
            break
        if word.startswith("--"):
            key, eq, value = word.partition("=")
            if key in spec.long_with_arg:
                if not eq:
                    if i + 1 >= n:
                        return f"{name} option {key} is missing its value"
                    value = argv[i + 1]
                    i += 1
                parsed.values[key] = value
            elif key in spec.long_flags:
                parsed.values[key] = value
            else:
                return f"{name} has an option the splitter does not know: {_short(key)}"
            parsed.seen.add(key)
            i += 1
            continue
        if word.startswith("-") and len(word) > 1:
            if spec.numeric and word[1:].lstrip("-").isdigit():
                i += 1
                continue
            j = 1
            while j < len(word):
                ch = word[j]
                parsed.seen.add(ch)
                if ch in spec.with_arg:
                    value = word[j + 1 :]
                    if not value:
                        if i + 1 >= n:
                            return f"{name} option -{ch} is missing its value"
                        value = argv[i + 1]
                        i += 1
                    parsed.values[ch] = value
                    break
                if ch in spec.optional_arg:
                    parsed.values[ch] = word[j + 1 :]
                    break
                if ch not in spec.flags:
                    return f"{name} has an option the splitter does not know: -{ch}"
                j += 1
            i += 1
            continue
        if spec.assignments and "=" in word and word.partition("=")[0].isidentifier():
            parsed.assignments.append(word.partition("=")[0])
            i += 1
            continue
        break
    parsed.index = i
    return parsed


def _simple(spec: _Options, skip: int = 0) -> Callable[[SimpleCommand], _Unwrapped]:
    """A wrapper that takes options, then `skip` operands, then the command."""

    def unwrap(command: SimpleCommand) -> _Unwrapped:
        parsed = _parse_options(command, spec)
        if isinstance(parsed, str):
            return parsed
        if parsed.seen & {"help", "--help", "--version"}:
            return None
        start = parsed.index + skip
        if start >= len(command.argv):
            return None
        return _Inner(start, _basename(command.argv[0]), tuple(parsed.assignments))

    return unwrap


_ENV = _Options(
    flags="i0v",
    with_arg="uCS",
    long_flags=frozenset(
        {
            "--ignore-environment",
            "--null",
            "--debug",
            "--help",
            "--version",
            "--default-signal",
            "--ignore-signal",
            "--block-signal",
            "--list-signal-handling",
        }
    ),
    long_with_arg=frozenset({"--unset", "--chdir", "--split-string"}),
    assignments=True,
)


def _env(command: SimpleCommand) -> _Unwrapped:
    argv = command.argv
    # A lone `-` means -i; it would otherwise end the option walk.
    if len(argv) > 1 and argv[1] == "-":
        command = SimpleCommand((argv[0], "-i", *argv[2:]), command.dynamic, via=command.via)
    parsed = _parse_options(command, _ENV)
    if isinstance(parsed, str):
        return parsed
    if "S" in parsed.seen or "--split-string" in parsed.seen:
        return "env -S splits a string into a command line the splitter does not read"
    if parsed.seen & {"--help", "--version"} or parsed.index >= len(command.argv):
        return None
    return _Inner(parsed.index, "env", tuple(parsed.assignments))


_SUDO = _Options(
    flags="AbBEeHiKklnNPSsVv",
    with_arg="CDghpRrTtUu",
    long_flags=frozenset(
        {
            "--askpass",
            "--background",
            "--bell",
            "--edit",
            "--help",
            "--set-home",
            "--login",
            "--remove-timestamp",
            "--reset-timestamp",
            "--list",
            "--non-interactive",
            "--preserve-groups",
            "--shell",
            "--stdin",
            "--validate",
            "--version",
            "--preserve-env",
        }
    ),
    long_with_arg=frozenset(
        {
            "--close-from",
            "--chdir",
            "--group",
            "--host",
            "--prompt",
            "--chroot",
            "--role",
            "--type",
            "--command-timeout",
            "--other-user",
            "--user",
        }
    ),
    assignments=True,
)


_SUDO_RUNS_NOTHING = frozenset({"e", "l", "v", "k", "K", "V", "--edit", "--list", "--validate"})
_SUDO_RUNS_NOTHING |= {"--version", "--help", "--reset-timestamp", "--remove-timestamp"}


def _sudo(command: SimpleCommand) -> _Unwrapped:
    parsed = _parse_options(command, _SUDO)
    if isinstance(parsed, str):
        return parsed
    seen = parsed.seen
    # -e edits files, -l lists, -v/-k/-K/-V touch only sudo itself: no command runs.
    if seen & _SUDO_RUNS_NOTHING:
        return None
    if parsed.index >= len(command.argv):
        if seen & {"s", "i", "--shell", "--login"}:
            return "sudo starts a shell that reads its script from standard input"
        return None
    return _Inner(parsed.index, "sudo", tuple(parsed.assignments))


def _doas(command: SimpleCommand) -> _Unwrapped:
    parsed = _parse_options(command, _Options(flags="nSsL", with_arg="uC"))
    if isinstance(parsed, str):
        return parsed
    if "C" in parsed.seen or "L" in parsed.seen:
        return None
    if parsed.index >= len(command.argv):
        if "s" in parsed.seen:
            return "doas starts a shell that reads its script from standard input"
        return None
    return _Inner(parsed.index, "doas")


_XARGS = _Options(
    flags="0prtxo",
    with_arg="EIadLnPs",
    optional_arg="eil",
    long_flags=frozenset(
        {
            "--null",
            "--interactive",
            "--verbose",
            "--exit",
            "--no-run-if-empty",
            "--open-tty",
            "--show-limits",
            "--help",
            "--version",
            "--eof",
            "--replace",
            "--max-lines",
        }
    ),
    long_with_arg=frozenset(
        {
            "--arg-file",
            "--delimiter",
            "--max-args",
            "--max-procs",
            "--max-chars",
            "--process-slot-var",
        }
    ),
)


def _xargs(command: SimpleCommand) -> _Unwrapped:
    parsed = _parse_options(command, _XARGS)
    if isinstance(parsed, str):
        return parsed
    if parsed.seen & {"--help", "--version", "--show-limits"} or parsed.index >= len(command.argv):
        return None
    placeholder = parsed.values.get("I", "")
    if not placeholder and ("i" in parsed.seen or "--replace" in parsed.seen):
        placeholder = parsed.values.get("i") or parsed.values.get("--replace") or "{}"
    return _Inner(parsed.index, "xargs", placeholder=placeholder)


def _command_builtin(command: SimpleCommand) -> _Unwrapped:
    parsed = _parse_options(command, _Options(flags="pVv"))
    if isinstance(parsed, str):
        return parsed
    if parsed.seen & {"v", "V"} or parsed.index >= len(command.argv):
        return None  # `command -v x` only looks x up
    return _Inner(parsed.index, "command")


def _ionice(command: SimpleCommand) -> _Unwrapped:
    parsed = _parse_options(command, _Options(flags="t", with_arg="cnpPu"))
    if isinstance(parsed, str):
        return parsed
    if parsed.seen & {"p", "P", "u"} or parsed.index >= len(command.argv):
        return None  # changes processes that already run
    return _Inner(parsed.index, "ionice")


def _shell(command: SimpleCommand) -> _Unwrapped:
    """`bash -c SCRIPT`, `bash FILE`, or `bash` reading its script from stdin."""
    argv = command.argv
    name = _basename(argv[0])
    script = False
    stdin = False
    info = False
    i, n = 1, len(argv)
    while i < n:
        word = argv[i]
        if i in command.dynamic:
            if script:
                break
            return f"{name} has an argument not known until run time: {_short(word)}"
        if word in ("--", "-"):
            i += 1
            break
        if word.startswith("--"):
            if word in ("--rcfile", "--init-file"):
                i += 1
            elif word in ("--version", "--help"):
                info = True
            i += 1
            continue
        if len(word) > 1 and word[0] in "-+":
            takes = 0
            for ch in word[1:]:
                if ch == "c":
                    script = True
                elif ch == "s":
                    stdin = True
                elif ch in "oO":
                    takes += 1
            i += 1 + takes
            continue
        break
    if script:
        if i >= n:
            return None
        return _Script(argv[i], f"{name} -c", i in command.dynamic)
    if info:
        return None
    if i < n and not stdin:
        return None  # runs a script file; the command itself is what a rule judges
    return f"{name} reads its script from standard input"


def _eval(command: SimpleCommand) -> _Unwrapped:
    start = 2 if len(command.argv) > 1 and command.argv[1] == "--" else 1
    if start >= len(command.argv):
        return None
    dynamic = any(i >= start for i in command.dynamic)
    return _Script(" ".join(command.argv[start:]), "eval", dynamic)


def _trap(command: SimpleCommand) -> _Unwrapped:
    argv = command.argv
    if len(argv) < 3 or argv[1].startswith("-"):
        return None  # `trap -p`, `trap -l`, `trap - SIG`, or printing one trap
    return _Script(argv[1], "trap", 1 in command.dynamic)


def _source(command: SimpleCommand) -> _Unwrapped:
    """`source FILE` runs a script file, like `bash FILE`: a rule judges the command.

    The one unknown is a script that is the output of another command
    (`source <(curl ...)`, `. "$(mktemp-and-fetch)"`): that is `curl | sh` again.
    """
    if len(command.argv) < 2:
        return None
    script = command.argv[1]
    if 1 in command.dynamic and ("<(" in script or "$(" in script or "`" in script):
        return f"{command.argv[0]} runs the output of a command as a script: {_short(script)}"
    return None


def _find(command: SimpleCommand) -> _Unwrapped:
    """`find ... -exec CMD {} ;` runs CMD for each file: each clause is a command."""
    argv = command.argv
    clauses: list[_Inner] = []
    i = 1
    while i < len(argv):
        if argv[i] in _FIND_EXEC and i not in command.dynamic:
            start = end = i + 1
            while end < len(argv) and argv[end] not in (";", "+"):
                end += 1
            if end > start:
                clauses.append(_Inner(start, f"find {argv[i]}", end=end, placeholder="{}"))
            i = end
        i += 1
    return tuple(clauses) or None


_FIND_EXEC = frozenset({"-exec", "-execdir", "-ok", "-okdir"})


_WRAPPERS: dict[str, Callable[[SimpleCommand], _Unwrapped]] = {
    "env": _env,
    "sudo": _sudo,
    "doas": _doas,
    "xargs": _xargs,
    "timeout": _simple(
        _Options(
            flags="v",
            with_arg="sk",
            long_flags=frozenset(
                {"--preserve-status", "--foreground", "--verbose", "--help", "--version"}
            ),
            long_with_arg=frozenset({"--signal", "--kill-after"}),
        ),
        skip=1,
    ),
    "nice": _simple(
        _Options(
            with_arg="n",
            long_with_arg=frozenset({"--adjustment"}),
            long_flags=frozenset({"--help", "--version"}),
            numeric=True,
        )
    ),
    "nohup": _simple(_Options(long_flags=frozenset({"--help", "--version"}))),
    "exec": _simple(_Options(flags="cl", with_arg="a")),
    "command": _command_builtin,
    "builtin": _simple(_Options()),
    "time": _simple(
        _Options(
            flags="pavq",
            with_arg="fo",
            long_with_arg=frozenset({"--format", "--output"}),
            long_flags=frozenset({"--portability", "--append", "--verbose", "--quiet"}),
        )
    ),
    "setsid": _simple(
        _Options(
            flags="cfw", long_flags=frozenset({"--ctty", "--fork", "--wait", "--help", "--version"})
        )
    ),
    "stdbuf": _simple(
        _Options(
            with_arg="ioe",
            long_with_arg=frozenset({"--input", "--output", "--error"}),
            long_flags=frozenset({"--help", "--version"}),
        )
    ),
    "ionice": _ionice,
    "eval": _eval,
    "trap": _trap,
    "find": _find,
    "source": _source,
    ".": _source,
    **dict.fromkeys(_SHELLS, _shell),
}


# ---------------------------------------------------------------- entry points


def _first_error(root: Node, src: bytes) -> str:
    """Name the first place the parse failed, in words a person can act on."""
    todo = [root]
    while todo:
        node = todo.pop()
        if node.is_missing:
            kind = node.type
            if kind in ('"', "'", "`"):
                return f"the line does not parse as shell: unterminated quote {kind}"
            return f"the line does not parse as shell: missing {kind}"
        if node.type == "ERROR":
            text = src[node.start_byte : node.end_byte].decode("utf-8", "replace")
            if text.count('"') % 2 or text.count("'") % 2:
                return "the line does not parse as shell: unterminated quote"
            return f"the line does not parse as shell near {_short(text, 20)!r}"
        if node.has_error:
            todo.extend(reversed(node.children))
    return "the line does not parse as shell"


_ASCII_MASK = bytes(range(128)) + b"x" * 128
"""Every non-ASCII byte read as the letter x, offsets unchanged.

tree-sitter-bash 0.25 passes code points to ctype functions that index a table:
some characters above U+E0000 after a `{` crash the process (a segfault, not an
exception), so an agent could stop the governor with one line. Bash's syntax is
all ASCII and treats other bytes as word characters, as `x` is, so the tree of
the masked line is the tree of the line; text is always cut from the original.
"""


def _split_text(text: str, via: tuple[str, ...]) -> Split:
    if not text.strip():
        return Split((), ())
    src = text.encode("utf-8", "surrogatepass")
    walker = _Walker(src, via)
    try:
        tree = _parser().parse(src if src.isascii() else src.translate(_ASCII_MASK))
        root = tree.root_node
        if _skipped(src[: root.start_byte]) or _skipped(src[root.end_byte :]):
            walker.unknown.append("the parser skipped part of the line")
        if root.has_error:
            walker.unknown.append(_first_error(root, src))
        walker.run(root)
    except RecursionError:
        walker.unknown.append("the line is nested too deeply to read")
    except Exception as exc:  # fail closed: a bug here must read as `ask`, never as `allow`
        walker.unknown.append(f"internal splitter error: {type(exc).__name__}")
    return Split(tuple(walker.commands), tuple(dict.fromkeys(walker.unknown)))


def split(line: str) -> Split:
    """Split a shell line into every simple command it would run.

    Each part of `a && b; c | d`, of `$(...)` and backticks, of loops and
    conditionals, and of what `bash -c`, `eval`, `sudo`, `env`, `xargs`, ...
    run is one `SimpleCommand`, in the order bash would start them (a
    substitution before the command that uses its output). Anything that
    cannot be judged from the text alone is a reason in `unknown`.

    Results are cached (they are immutable); lines longer than a typical
    command are split afresh, so a flood of huge lines cannot fill memory.
    """
    if len(line) > MAX_LINE:
        return Split(
            (), (f"the line is {len(line)} characters; the splitter reads at most {MAX_LINE}",)
        )
    if len(line) > _CACHED_LENGTH:
        return _split_text(line, ())
    return _split_cached(line)


@functools.lru_cache(maxsize=4096)
def _split_cached(line: str) -> Split:
    return _split_text(line, ())


def split_argv(argv: Sequence[str]) -> Split:
    """Judge an argv run without a shell (ACP `terminal/create`): one command, unwrapped.

    No word is expanded, so nothing is dynamic; a wrapper such as `bash -c`
    still has its script parsed as shell.
    """
    if not argv:
        return Split((), ("an empty command",))
    walker = _Walker(b"", ())
    try:
        walker.emit(SimpleCommand(tuple(argv)))
    except RecursionError:
        walker.unknown.append("the command is nested too deeply to read")
    except Exception as exc:  # fail closed, as in `split`
        walker.unknown.append(f"internal splitter error: {type(exc).__name__}")
    return Split(tuple(walker.commands), tuple(dict.fromkeys(walker.unknown)))
