"""The `governor` command line.

Each subcommand lives in its own module with a ``register(subparsers)`` function
that adds its parser and sets ``func``; this file only wires them together and
states the exit-code convention (`EXITS`, kept in `governor.ending.exit_codes`
so that a batch's jobs use it without the command line). A command imports its
own module and no other (`COMMANDS`), and a module imports what its command runs (trio, the
ACP schema, the sandbox's processes) inside the functions that run it: the
answers that print and exit (``--help``, ``--version``, ``presets``, ``check``)
must not wait a second for an attempt's machinery.

0 completed · 1 failed or incomplete · 2 refused before start (usage, config,
ceiling, environment) · 3 blocked · 4 needs approval · 5 completed but a check
failed (the verdict is ``failed``) · 6 completed, but ``--fail-on`` matched.

May import: every room (it is the top one).
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Final, NoReturn

from governor.ending.exit_codes import (
    CHECK_FAILED,
    EXIT_BY_STATUS,
    EXIT_CODES,
    EXITS,
    FAILED_ON,
    REFUSED_BEFORE_START,
    exit_code,
    exit_code_of,
)
from governor.sandbox.host.descriptors import raise_descriptor_limit
from governor.version import __version__

__all__ = [  # the exit-code convention is read here by the commands and their tests
    "CHECK_FAILED",
    "EXITS",
    "EXIT_BY_STATUS",
    "EXIT_CODES",
    "FAILED_ON",
    "REFUSED_BEFORE_START",
    "build_parser",
    "exit_code",
    "exit_code_of",
    "main",
]

COMMANDS: Final = (
    "run", "approve", "resume", "batch", "audit", "check", "presets", "agents", "sandbox",
    "doctor", "completion",
)  # fmt: skip
"""The subcommands in ``governor --help``'s order, each registered by `governor.cli.<name>`."""


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole `governor` parser, every subcommand registered, or with only the
    subcommand `only` (one of `COMMANDS`): what parsing that command's words needs."""
    parser = argparse.ArgumentParser(
        prog="governor",
        description="Run ACP coding agents under one policy engine, a bubblewrap sandbox "
        "and a tamper-evident audit log.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-V", "--version", action="version", version=f"acp-governor {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS if only is None else (only,):
        importlib.import_module(f"governor.cli.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `governor` console script; returns the exit code."""
    words = list(sys.argv[1:] if argv is None else argv)
    command: list[str] | None = None
    if words and words[0] == "run" and "--" in words:
        # Everything after the first `--` is the agent's argv, options included.
        cut = words.index("--")
        words, command = words[:cut], words[cut + 1 :]
    try:
        # a command's words need its own parser; anything else (--help, --version,
        # a misspelt command) the whole one
        parser = build_parser(words[0] if words and words[0] in COMMANDS else None)
    except KeyboardInterrupt:  # Ctrl-C before anything started: a word, not a traceback
        print("governor: interrupted", file=sys.stderr)
        return 130
    if words and not words[0].startswith("-") and words[0] not in COMMANDS:
        near = difflib.get_close_matches(words[0], COMMANDS, n=1, cutoff=0.6)
        guess = f" (did you mean '{near[0]}'?)" if near else ""
        parser.error(f"no command '{words[0]}'{guess}; the commands: {', '.join(COMMANDS)}")
    args, unknown = parser.parse_known_args(words)
    if unknown:
        _unrecognized(parser, words[0] if words else None, unknown)
    if command is not None:
        args.command = command
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    # the flood a hard limit allows is the one the governor meets (`governor.sandbox.net.accepting`)
    raise_descriptor_limit()
    try:
        code: int = args.func(args)
        # what is still buffered, written now: at the interpreter's exit a reader
        # gone would be an "Exception ignored ... BrokenPipeError" and exit 120
        sys.stdout.flush()
    except BrokenPipeError:  # e.g. `governor presets | head`
        _reader_gone()
        return 0
    except BaseExceptionGroup as group:  # the same from inside a trio run
        if group.subgroup(BrokenPipeError) is None or group.split(BrokenPipeError)[1]:
            raise
        _reader_gone()
        return 0
    return code


def _reader_gone() -> None:
    """The reader of stdout left (``| head``): end quietly. What is still in
    stdout's buffer would raise again when Python flushes it at exit, so stdout
    is pointed at /dev/null first."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _unrecognized(
    parser: argparse.ArgumentParser, command: str | None, words: Sequence[str]
) -> NoReturn:
    """Refuse words no option takes, with the command's own usage and, for a
    misspelt option, the one it looks like (``--agnet``: did you mean --agent?)."""
    if command is not None:
        for action in parser._actions:  # argparse has no public list of its subparsers
            if isinstance(action, argparse._SubParsersAction) and command in action.choices:
                parser = action.choices[command]
    options = [name for action in parser._actions for name in action.option_strings]
    said = f"unrecognized arguments: {' '.join(words)}"
    for word in words:
        if word.startswith("-"):
            near = difflib.get_close_matches(word.split("=", 1)[0], options, n=1, cutoff=0.75)
            if near:
                said += f" (did you mean {near[0]}?)"
                break
    parser.error(said)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
