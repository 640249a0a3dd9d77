"""Split a shell command line into the simple commands it would run.

Everything that decides what a line *is* lives in this package; nothing here
decides whether it may run. The policy engine asks every part, so the one hazard
the splitter must never commit is a silent omission: a construct it cannot read
becomes a plain-English reason in `Split.unknown` (the engine turns that into
`ask`, never `allow`), never a shorter list of commands that looks complete.

The line is parsed once with tree-sitter-bash and the tree is walked with an
explicit stack, so a long `a && b && c ...` chain cannot exhaust Python's
recursion limit. Wrappers that run another command (`sudo`, `env`, `xargs`,
`timeout`, `find -exec`, ...) are unwrapped, and shells given a script as a
string (`bash -c`, `eval`, `trap`) have that string parsed again. The wrapper
itself stays in the result so a rule such as `sudo *` can still match it.

Limits, each an unknown reason when passed, never a truncated result: at most
`MAX_DEPTH` wrappers nest (`sudo bash -c 'env bash -c ...'`); a line longer
than `MAX_LINE` characters is not parsed at all; a line nested too deeply for
the parser, or a walk that does not finish, is unknown too. Results are cached
for lines up to `_CACHED_LENGTH` characters.

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

The modules, each depending only on those above it:

- `words`: quote removal, ANSI-C strings, and the text tests on words and gaps;
- `grammar`: the tree-sitter-bash node types and bash words the walker tests;
- `result`: `SimpleCommand` and `Split`, what a split returns;
- `wrappers`: the commands that run another command, and what each runs;
- `word_nodes`: a word node's value after quote removal, and its substitutions;
- `redirects`: the files a redirect reads and writes, and the words hung on it;
- `walker`: the walk over one parsed tree, and the handler of each node type;
- this module: the per-thread parser, the cache, and the entry points `split`
  and `split_argv` (each walker is given `_split_text`, to split a script).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Sequence

import tree_sitter_bash
from tree_sitter import Language, Node, Parser

from governor.policies.shell.result import SimpleCommand, Split
from governor.policies.shell.walker import MAX_DEPTH, _Walker
from governor.policies.shell.words import _short, _skipped

__all__ = ["MAX_DEPTH", "MAX_LINE", "SimpleCommand", "Split", "split", "split_argv"]

MAX_LINE = 1 << 20
"""The longest line split at all (Linux caps one argument at 128 KiB, a whole command at 2 MiB)."""

_CACHED_LENGTH = 4096


# ---------------------------------------------------------------- parser

_LOCAL = threading.local()


def _parser() -> Parser:
    """One parser per thread: a `Parser` keeps state between calls and is not shared."""
    parser: Parser | None = getattr(_LOCAL, "parser", None)
    if parser is None:
        parser = Parser(Language(tree_sitter_bash.language()))
        _LOCAL.parser = parser
    return parser


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
    walker = _Walker(src, via, _split_text)
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
    walker = _Walker(b"", (), _split_text)
    try:
        walker.emit(SimpleCommand(tuple(argv)))
    except RecursionError:
        walker.unknown.append("the command is nested too deeply to read")
    except Exception as exc:  # fail closed, as in `split`
        walker.unknown.append(f"internal splitter error: {type(exc).__name__}")
    return Split(tuple(walker.commands), tuple(dict.fromkeys(walker.unknown)))
