"""JavaScript, TypeScript, Rust and Go test files read with tree-sitter: pure.

The grammars are the PyPI wheels (``tree-sitter-javascript``,
``-typescript``, ``-rust``, ``-go``), each parsed once per file; the tree is
walked with an explicit stack, since the agent writes these files and a deep
one must not exhaust Python's recursion.

- JavaScript / TypeScript (jest, vitest, mocha): a test is an ``it(...)`` or
  ``test(...)`` call, named by its string and the ``describe`` blocks around
  it; an assertion is an ``expect(...)`` or ``assert...(...)`` call.
  Markers: ``.skip``, ``.skipIf``, ``.todo``, ``xit``, ``xtest``,
  ``xdescribe``, ``this.skip()``; ``.only``, ``fit``, ``fdescribe``.
  Suppressions are comments: ``@ts-ignore``, ``@ts-expect-error``,
  ``@ts-nocheck``, ``eslint-disable``, ``istanbul ignore``, ``c8 ignore``.
- Rust: a test is a function with a ``#[test]``-like attribute (``#[test]``,
  ``#[tokio::test]``, ``#[rstest]``...), named by its module path; an assertion
  is an ``assert*!`` macro. Marker: ``#[ignore]``. Suppression: ``#[allow(...)]``
  and ``#![allow(...)]``.
- Go: a test is a ``func TestX(t *testing.T)``; an assertion is a call of
  ``Error``, ``Errorf``, ``Fatal``, ``Fatalf``, ``Fail``, ``FailNow`` or of the
  ``assert`` / ``require`` packages. Markers: ``t.Skip``, ``t.Skipf``,
  ``t.SkipNow``, a ``//go:build ignore`` constraint. Suppressions:
  ``//nolint``, ``//lint:ignore``.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Callable, Iterator
from typing import Final

import tree_sitter_go
import tree_sitter_javascript
import tree_sitter_rust
import tree_sitter_typescript
from tree_sitter import Language, Node, Parser

from governor.tamper.facts import Code, Facts, Mark, Shape, Test, constant

MAX_DEPTH: Final = 2_000
"""Deeper than this, a tree is not looked into (no test is written that deep)."""

_LANGUAGES: Final[dict[str, Callable[[], object]]] = {
    "javascript": tree_sitter_javascript.language,
    "typescript": tree_sitter_typescript.language_typescript,
    "tsx": tree_sitter_typescript.language_tsx,
    "rust": tree_sitter_rust.language,
    "go": tree_sitter_go.language,
}


@functools.cache
def _parser(language: str) -> Parser:
    return Parser(Language(_LANGUAGES[language]()))


def _parse(language: str, text: str) -> Node | None:
    """The root of the tree; None when the text has a syntax error."""
    root = _parser(language).parse(text.encode()).root_node
    return None if root.has_error else root


def _walk(root: Node) -> Iterator[Node]:
    stack = [(root, 0)]
    while stack:
        node, depth = stack.pop()
        yield node
        if depth < MAX_DEPTH:
            stack.extend((c, depth + 1) for c in reversed(node.children))


def _text(node: Node | None) -> str:
    return "" if node is None or node.text is None else node.text.decode("utf-8", "replace")


def _squeezed(node: Node | None) -> str:
    return re.sub(r"\s+", "", _text(node))


def _line(node: Node) -> int:
    return node.start_point[0] + 1


def _not_parsed(language: str) -> Facts:
    return Facts(error=f"not valid {language}: the parser found a syntax error")


def _comment_marks(
    root: Node, lines: list[str], patterns: tuple[tuple[str, re.Pattern[str]], ...]
) -> list[Mark]:
    out: list[Mark] = []
    if not any(pattern.search(line) for line in lines for _, pattern in patterns):
        return out  # no line holds one: the tree need not be walked again
    for node in _walk(root):
        if node.type not in ("comment", "line_comment", "block_comment"):
            continue
        body = _text(node)
        for label, pattern in patterns:
            if pattern.search(body):
                row = node.start_point[0]
                code = lines[row][: node.start_point[1]].strip() if row < len(lines) else ""
                out.append(Mark("suppression-added", label, code, row + 1))
    return out


# -- JavaScript and TypeScript ------------------------------------------------------

_JS_SUPPRESSIONS: Final = (
    ("@ts-ignore", re.compile(r"@ts-ignore")),
    ("@ts-expect-error", re.compile(r"@ts-expect-error")),
    ("@ts-nocheck", re.compile(r"@ts-nocheck")),
    ("eslint-disable", re.compile(r"eslint-disable")),
    ("istanbul ignore", re.compile(r"istanbul\s+ignore")),
    ("c8 ignore", re.compile(r"c8\s+ignore")),
    ("v8 ignore", re.compile(r"v8\s+ignore")),
)
_JS_TESTS: Final = {"it", "test"}
_JS_GROUPS: Final = {"describe", "context", "suite"}
_JS_SKIP: Final = {"xit", "xtest", "xdescribe", "xcontext"}
_JS_ONLY: Final = {"fit", "fdescribe", "ftest"}
_JS_EQUAL: Final = {"toBe", "toEqual", "toStrictEqual"}
_JS_TRUTHY: Final = {"toBeTruthy", "toBeDefined"}
_JS_LITERALS: Final = {"true", "string", "number", "object", "array"}


def javascript(text: str, language: str = "javascript") -> Facts:
    """The tests, markers and suppressions of a JavaScript (``typescript``,
    ``tsx``) file."""
    root = _parse(language, text)
    if root is None:
        return _not_parsed(language)
    out = Facts()
    # (node, describe path, the test it is inside); an explicit stack
    stack: list[tuple[Node, tuple[str, ...], str | None, int]] = [(root, (), None, 0)]
    while stack:
        node, groups, test, depth = stack.pop()
        inner_groups, inner_test = groups, test
        if node.type == "call_expression":
            inner_groups, inner_test = _js_call(out, node, groups, test)
        if depth < MAX_DEPTH:
            stack.extend((c, inner_groups, inner_test, depth + 1) for c in reversed(node.children))
    out.marks.extend(_comment_marks(root, text.splitlines(), _JS_SUPPRESSIONS))
    _js_code(out, root)
    return out


def _shape(node: Node) -> Shape:
    """A subtree's `Shape`: its text, its tokens made only when the text differs."""
    return Shape(_text(node), lambda: _tokens(node))


def _tokens(node: Node) -> str:
    """A subtree as its tokens, comments and whitespace left out: what it does."""
    out: list[str] = []
    for sub in _walk(node):
        if sub.type in ("comment", "line_comment", "block_comment"):
            continue
        if sub.child_count == 0:
            out.append(_text(sub))
    return "\x00".join(out)


_JS_DECLARATIONS: Final = {
    "import_statement",
    "function_declaration",
    "generator_function_declaration",
    "class_declaration",
    "lexical_declaration",
    "variable_declaration",
    "export_statement",
    "empty_statement",
    "interface_declaration",
    "type_alias_declaration",
    "enum_declaration",
    "abstract_class_declaration",
    "ambient_declaration",
    "import_alias",
}


def _js_code(out: Facts, root: Node) -> None:
    """The top-level statements of a test file that are not test or group calls:
    by the names they declare (``const expected = 4``), or by their tokens (a
    statement that runs as the file loads: ``m.mean = () => 4``,
    ``process.exit(0)``)."""
    hooks: dict[str, int] = {}
    for node in root.named_children:
        if node.type == "comment":
            continue
        if node.type == "expression_statement":
            call = node.named_children[0] if node.named_children else None
            callee = (
                call.child_by_field_name("function")
                if call is not None and call.type == "call_expression"
                else None
            )
            head = _squeezed(callee).partition(".")[0] if callee is not None else ""
            if head in _JS_HOOKS:  # by kind and order: a moved one is the same
                hooks[head] = hooks.get(head, 0) + 1
                out.code[f"{head} #{hooks[head]}"] = Code(
                    _line(node), _shape(node), constant(f"{head} runs around the tests")
                )
                continue
            if head.lstrip("xf") in _JS_TESTS | _JS_GROUPS:
                continue
        if node.type == "import_statement":
            out.code.update(_js_imports(node))
            continue
        names = _js_declared(node)
        text = _text(node)
        key = (
            ", ".join(names)
            if names
            else f"statement {text[:60]!r} ({hashlib.sha256(text.encode()).hexdigest()[:12]})"
        )
        out.code[key] = Code(_line(node), _shape(node), functools.partial(_js_runs, node))


_JS_HOOKS: Final = {"before", "after", "beforeEach", "afterEach", "beforeAll", "afterAll"}
_JS_NAMED: Final = {"function_declaration", "generator_function_declaration", "class_declaration",
                    "abstract_class_declaration", "interface_declaration", "type_alias_declaration",
                    "enum_declaration"}  # fmt: skip


def _js_declared(node: Node) -> list[str]:
    """The names a top-level statement declares (``const a = 1, b`` -> a, b)."""
    if node.type == "export_statement":
        inner = node.child_by_field_name("declaration")
        return _js_declared(inner) if inner is not None else []
    if node.type in _JS_NAMED:
        return [_text(node.child_by_field_name("name"))]
    if node.type in ("lexical_declaration", "variable_declaration"):
        return [
            _text(d.child_by_field_name("name"))
            for d in node.named_children
            if d.type == "variable_declarator"
        ]
    return []


def _js_imports(node: Node) -> dict[str, Code]:
    """One `Code` per local name an import binds, what it binds it to as its
    body (``import { add } from './calc'``: ``add`` is ``'./calc':add``)."""
    source = _text(node.child_by_field_name("source"))
    out = {}
    for n in _walk(node):
        if n.type == "import_specifier":
            imported = _text(n.child_by_field_name("name"))
            local = _text(n.child_by_field_name("alias")) or imported
        elif n.type == "namespace_import":
            local = _text(n.named_children[-1]) if n.named_children else ""
            imported = "*"
        elif n.type == "identifier" and n.parent is not None and n.parent.type == "import_clause":
            local, imported = _text(n), "default"
        else:
            continue
        meant = f"{source}:{imported}"
        out[local] = Code(_line(node), Shape(meant, constant(meant)))
    return out


def _js_runs(node: Node) -> str | None:
    """Why a top-level statement runs code as the file loads, or None."""
    if node.type == "import_statement":
        return None
    if node.type not in _JS_DECLARATIONS or _runs_at_load(node):
        return "it runs as the file loads"
    return None


_JS_FUNCTIONS: Final = {
    "arrow_function",
    "function_expression",
    "function",
    "function_declaration",
    "method_definition",
    "generator_function",
    "generator_function_declaration",
}
_JS_ACTIONS: Final = {
    "call_expression",
    "new_expression",
    "assignment_expression",
    "await_expression",
}


def _runs_at_load(top: Node) -> bool:
    """Whether ``top`` calls, constructs, assigns or awaits outside a function
    body (what runs when the file loads; a function's body runs when called)."""
    stack = [(top, 0)]
    while stack:
        node, depth = stack.pop()
        if node.type in _JS_ACTIONS:
            return True
        if node.type in _JS_FUNCTIONS or depth >= MAX_DEPTH:
            continue
        stack.extend((c, depth + 1) for c in node.children)
    return False


def _js_call(
    out: Facts, node: Node, groups: tuple[str, ...], test: str | None
) -> tuple[tuple[str, ...], str | None]:
    callee = node.child_by_field_name("function")
    args = node.child_by_field_name("arguments")
    name = _squeezed(callee)
    if callee is not None and callee.type == "call_expression":  # it.each(rows)("name", fn)
        name = _squeezed(callee.child_by_field_name("function"))
    head, _, modifier = name.partition(".")
    title = _js_title(args)
    bare = head.lstrip("xf") if name in _JS_SKIP | _JS_ONLY else head
    named = title is not None and test is None and bare in _JS_TESTS | _JS_GROUPS
    scope = (
        " > ".join((*groups, title)) if named and title is not None else test or " > ".join(groups)
    ) or "the file"
    option = _js_option(args) if named else None
    if name in _JS_SKIP or (
        head in _JS_TESTS | _JS_GROUPS and modifier in ("skip", "skipIf", "todo")
    ):
        out.marks.append(Mark("skip-added", name, scope, _line(node)))
    elif name in _JS_ONLY or (head in _JS_TESTS | _JS_GROUPS and modifier == "only"):
        out.marks.append(Mark("only-added", name, scope, _line(node)))
    elif name == "this.skip":
        out.marks.append(Mark("skip-added", "this.skip()", scope, _line(node)))
    elif option is not None:
        rule = "only-added" if option == "only" else "skip-added"
        out.marks.append(Mark(rule, f"{{{option}}} option", scope, _line(node)))
    elif (
        test is not None
        and modifier in ("skip", "todo")
        and head not in _JS_TESTS | _JS_GROUPS
        and callee is not None
        and callee.type == "member_expression"
    ):  # node:test's t.skip() / t.todo() on the test's context
        out.marks.append(Mark("skip-added", f"t.{modifier}()", test, _line(node)))
    if named and title is not None and bare in _JS_GROUPS:
        return (*groups, title), None
    if named and title is not None:
        full = " > ".join((*groups, title))
        out.tests.setdefault(full, Test(_line(node), body=_shape(node)))
        return groups, full
    if test is not None and callee is not None:
        _js_assertion(out.tests[test], node, callee, name, args)
    return groups, test


_JS_OPTIONS: Final = {"skip": "skip", "todo": "todo", "only": "only"}


def _js_option(args: Node | None) -> str | None:
    """node:test's ``test(name, {skip: true}, fn)``: the option that skips (or
    focuses) the test, unless its value is a literal false."""
    if args is None:
        return None
    for value in args.named_children[1:2]:
        if value.type != "object":
            continue
        for pair in value.named_children:
            if pair.type == "shorthand_property_identifier" and _text(pair) in _JS_OPTIONS:
                return _text(pair)
            if pair.type != "pair":
                continue
            key = _text(pair.child_by_field_name("key")).strip("\"'`")
            shown = _squeezed(pair.child_by_field_name("value"))
            if key in _JS_OPTIONS and shown not in ("false", "0", "''", '""', "null", "undefined"):
                return _JS_OPTIONS[key]
    return None


def _js_title(args: Node | None) -> str | None:
    if args is None or args.named_child_count == 0:
        return None
    first = args.named_children[0]
    if first.type in ("string", "template_string"):
        return _text(first)[1:-1]
    return None


def _js_assertion(test: Test, node: Node, callee: Node, name: str, args: Node | None) -> None:
    if name == "expect" or name.startswith("assert"):
        test.asserts += 1
        if name.startswith("assert") and args is not None:
            values = args.named_children
            if (len(values) == 1 and values[0].type == "true") or (
                len(values) >= 2 and _squeezed(values[0]) == _squeezed(values[1])
            ):
                test.trivial.append(_line(node))
        return
    # expect(A).toBe(B): the outer call of an expect
    if callee.type != "member_expression":
        return
    target = callee.child_by_field_name("object")
    method = _text(callee.child_by_field_name("property"))
    if target is None or target.type != "call_expression":
        return
    if _squeezed(target.child_by_field_name("function")) != "expect":
        return
    inner = target.child_by_field_name("arguments")
    subject = inner.named_children[0] if inner is not None and inner.named_children else None
    values = args.named_children if args is not None else []
    if subject is None:
        return
    if (
        method in _JS_EQUAL and len(values) == 1 and _squeezed(values[0]) == _squeezed(subject)
    ) or (
        method in _JS_TRUTHY
        and subject.type in _JS_LITERALS
        and _text(subject) not in ('""', "''", "0")
    ):
        test.trivial.append(_line(node))


# -- Rust ---------------------------------------------------------------------------

_RUST_TEST_ATTRS: Final = re.compile(r"^#\[(\w+::)*(test|rstest|test_case|quickcheck)\b")


def rust(text: str) -> Facts:
    """The tests, markers and ``#[allow]`` suppressions of a Rust file."""
    root = _parse("rust", text)
    if root is None:
        return _not_parsed("rust")
    out = Facts()
    lines = text.splitlines()
    containers: list[tuple[Node, tuple[str, ...], int]] = [(root, (), 0)]
    while containers:
        container, path, depth = containers.pop()
        attrs: list[Node] = []
        for child in container.named_children:
            if child.type == "attribute_item":
                attrs.append(child)
                continue
            if child.type == "function_item":
                _rust_function(out, child, attrs, path)
            elif child.type == "mod_item" and depth < MAX_DEPTH:
                body = child.child_by_field_name("body")
                if body is not None:
                    name = _text(child.child_by_field_name("name"))
                    containers.append((body, (*path, name), depth + 1))
            attrs = []
    for node in _walk(root):
        if node.type in ("attribute_item", "inner_attribute_item"):
            attribute = next((c for c in node.named_children if c.type == "attribute"), None)
            if attribute is not None and _text(attribute).startswith("allow"):
                row = node.start_point[0]
                after = lines[row + 1].strip() if row + 1 < len(lines) else ""
                out.marks.append(
                    Mark("suppression-added", f"#[{_squeezed(attribute)}]", after, row + 1)
                )
    return out


def _rust_function(out: Facts, fn: Node, attrs: list[Node], path: tuple[str, ...]) -> None:
    texts = [_squeezed(a) for a in attrs]
    if not any(_RUST_TEST_ATTRS.match(t) for t in texts):
        return
    name = "::".join((*path, _text(fn.child_by_field_name("name"))))
    test = Test(_line(fn), body=_shape(fn))
    for attr, shown in zip(attrs, texts, strict=True):
        if shown.startswith("#[ignore"):
            out.marks.append(Mark("skip-added", "#[ignore]", name, _line(attr)))
    body = fn.child_by_field_name("body")
    for node in _walk(body) if body is not None else ():
        if node.type != "macro_invocation":
            continue
        macro = _text(node.child_by_field_name("macro")).rsplit("::", 1)[-1]
        if not macro.startswith(("assert", "debug_assert", "prop_assert")):
            continue
        test.asserts += 1
        tree = next((c for c in node.named_children if c.type == "token_tree"), None)
        parts = _top_level_args(tree)
        if (macro in ("assert", "debug_assert") and parts[:1] == ["true"]) or (
            macro.endswith("_eq") and len(parts) >= 2 and parts[0] == parts[1]
        ):
            test.trivial.append(_line(node))
    out.tests[name] = test


def _top_level_args(tree: Node | None) -> list[str]:
    """A macro's arguments split at its top-level commas, whitespace removed."""
    if tree is None:
        return []
    parts: list[str] = [""]
    for child in tree.children[1:-1]:  # within the brackets
        if child.type == ",":
            parts.append("")
        else:
            parts[-1] += _squeezed(child)
    return [p for p in parts if p]


# -- Go -----------------------------------------------------------------------------

_GO_SUPPRESSIONS: Final = (
    ("//nolint", re.compile(r"//\s*nolint")),
    ("//lint:ignore", re.compile(r"//\s*lint:ignore")),
)
_GO_FAILS: Final = {"Error", "Errorf", "Fatal", "Fatalf", "Fail", "FailNow"}
_GO_SKIPS: Final = {"Skip", "Skipf", "SkipNow"}
_GO_BUILD_IGNORE: Final = re.compile(r"^//(go:build|\s*\+build)\s+.*\bignore\b")


def go(text: str) -> Facts:
    """The tests, markers and suppressions of a Go test file."""
    root = _parse("go", text)
    if root is None:
        return _not_parsed("go")
    out = Facts()
    for node in root.named_children:
        if node.type == "comment" and _GO_BUILD_IGNORE.match(_text(node)):
            out.marks.append(Mark("skip-added", "//go:build ignore", "the file", _line(node)))
        if node.type != "function_declaration":
            continue
        name = _text(node.child_by_field_name("name"))
        params = _text(node.child_by_field_name("parameters"))
        if not name.startswith("Test") or "testing.T" not in params:
            continue
        test = out.tests[name] = Test(_line(node), body=_shape(node))
        body = node.child_by_field_name("body")
        for sub in _walk(body) if body is not None else ():
            if sub.type == "call_expression":
                _go_call(out, test, name, sub)
    out.marks.extend(_comment_marks(root, text.splitlines(), _GO_SUPPRESSIONS))
    return out


def _go_call(out: Facts, test: Test, name: str, call: Node) -> None:
    callee = call.child_by_field_name("function")
    if callee is None or callee.type != "selector_expression":
        return
    package = _text(callee.child_by_field_name("operand"))
    method = _text(callee.child_by_field_name("field"))
    args = call.child_by_field_name("arguments")
    values = [_squeezed(v) for v in args.named_children] if args is not None else []
    if method in _GO_SKIPS:
        out.marks.append(Mark("skip-added", f"t.{method}", name, _line(call)))
    elif package in ("assert", "require"):
        test.asserts += 1
        if (method == "True" and values[1:2] == ["true"]) or (
            method == "Equal" and len(values) >= 3 and values[1] == values[2]
        ):
            test.trivial.append(_line(call))
    elif method in _GO_FAILS:
        test.asserts += 1


# -- configuration objects ------------------------------------------------------------


def object_pairs(text: str, language: str = "javascript") -> dict[str, tuple[int, str]] | None:
    """Every ``key: value`` of the object literals in a JavaScript or TypeScript
    file (a ``jest.config.js``), keyed by its dotted path (``test.exclude``):
    key -> (its line, its value's text without whitespace); None when the text
    does not parse."""
    root = _parse(language, text)
    if root is None:
        return None
    out: dict[str, tuple[int, str]] = {}
    stack: list[tuple[Node, tuple[str, ...], int]] = [(root, (), 0)]
    while stack:
        node, path, depth = stack.pop()
        inner = path
        if node.type == "pair":
            key = node.child_by_field_name("key")
            name = _text(key).strip("\"'`")
            inner = (*path, name)
            out[".".join(inner)] = (_line(node), _squeezed(node.child_by_field_name("value")))
        if depth < MAX_DEPTH:
            stack.extend((c, inner, depth + 1) for c in reversed(node.children))
    return out
