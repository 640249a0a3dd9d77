"""The walk over one tree-sitter-bash tree: every simple command, in the order bash starts them.

`_Walker.run` drives an explicit stack (a long `a && b && c ...` cannot exhaust
Python's recursion limit) and hands each node to its handler in `_HANDLERS`; a
node type with no handler is unknown. Each handler either pushes the nodes
inside (statements, substitutions, clauses) or turns a node into a
`SimpleCommand`. Substitutions are pushed on top of the command that uses their
output, so they come out first. Redirects the grammar hangs on a whole list or
pipeline are moved to its rightmost command, and words it drops or misplaces
are put back or made unknown (see the package docstring for each misreading).
A word's value is read by the base `word_nodes._WordReader`, a redirect's
files by `redirects._RedirectReader`; the statements and commands are here.

Every emitted command is looked up in `governor.policies.shell.wrappers`: what a wrapper
runs is emitted after it, one level deeper in `via`, and a script it runs is
split again by the function the walker was given (`_Resplit`), up to
`MAX_DEPTH` wrappers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tree_sitter import Node

from governor.policies.shell.grammar import (
    _ARITH_ASSIGN,
    _CASE_ENDS,
    _CHAINS,
    _CLAUSES,
    _MISPLACED,
    _REDIRECTS,
    _STATEMENTS,
    _SUBSTITUTIONS,
    _WORDISH,
    _hazardous,
)
from governor.policies.shell.redirects import _NO_REDIRECTS, _merge, _RedirectReader, _Redirects
from governor.policies.shell.result import SimpleCommand, Split
from governor.policies.shell.words import (
    _PLAIN,
    _basename,
    _line_break,
    _short,
    _skipped,
)
from governor.policies.shell.wrappers import _WRAPPERS, _Inner, _Script

MAX_DEPTH = 8
"""How many wrappers (`sudo`, `bash -c`, `env`, ...) may nest before a part is unknown."""

_Resplit = Callable[[str, tuple[str, ...]], Split]
"""How a script (`bash -c`, `eval`, `trap`) is split: as a line of its own, under `via`.

The package passes its `_split_text` (which builds a walker of its own); it is
passed in rather than imported because the package imports this module.
"""


class _Walker(_RedirectReader):
    """Collects the parts of one parsed line; one instance per parse.

    Words and redirects are read by the bases (`word_nodes`, `redirects`); the
    statements, the commands and their unwrapping are walked here.
    """

    __slots__ = ("_args", "_extra", "_resplit", "_stack", "commands", "via")

    def __init__(self, src: bytes, via: tuple[str, ...], resplit: _Resplit) -> None:
        super().__init__(src)
        self.via = via
        self._resplit = resplit
        self.commands: list[SimpleCommand] = []
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
        nested = self._resplit(script.text, (*via, script.label))
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
    # The parse failure is already a reason (`_first_error`, in the package); what did parse is
    # still walked, so a deny rule can see it.
    "ERROR": _Walker.container,
}
