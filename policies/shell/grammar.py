"""The names the walker tests against: tree-sitter-bash node types and bash's own words.

- Node types: which stand where a command may (`_STATEMENTS`), which hold one
  (`_CLAUSES`, `_SUBSTITUTIONS`), which are words (`_WORDISH`, `_LITERALS`,
  `_EXPANSIONS`) and which are redirects (`_REDIRECTS`). Which handler walks a
  node type is the walker's `_HANDLERS`; a type with none there is unknown.
- Bash's own words: redirect operators (`_WRITE_OPS`, `_READ_OPS`), reserved
  words bash refuses as a command name (`_MISPLACED`), case terminators, and
  arithmetic assignment operators.
- Variables whose assignment changes which program a name runs or makes a
  shell run code of its own (`_hazardous`).

Tables, and the one test over them (`_hazardous`); the node type names are
those of tree-sitter-bash 0.25.
"""

from __future__ import annotations

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


def _hazardous(name: str, *, lasting: bool) -> bool:
    """Whether assigning `name` changes what commands run; `lasting` when it outlives one command."""
    return (
        name in _HAZARD_NAMES
        or name.startswith(_HAZARD_PREFIXES)
        or (lasting and name in _SHELL_STATE)
    )


_MISPLACED = frozenset(
    {"if", "then", "else", "elif", "fi", "for", "select", "while", "until", "do", "done"}
    | {"case", "esac", "in", "function", "{", "}", "[[", "]]", ";;", "!"}
)
"""Reserved words that bash refuses as the first word of a command."""

_CASE_ENDS = frozenset({";;", ";&", ";;&"})


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
