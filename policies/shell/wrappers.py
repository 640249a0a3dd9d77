"""Commands that run another command: `sudo`, `env`, `xargs`, `bash -c`, `find -exec`, ...

`_WRAPPERS` maps a command name (its basename: `/usr/bin/sudo` is `sudo`) to a
function that reads the wrapper's argv and says what it runs (`_Unwrapped`):

- `_Inner`: a command inside its own argv, from `argv[start]` (to `end`), with
  a `label` for `SimpleCommand.via` (`sudo`, `find -exec`); a tuple of them when
  it runs several (`find -exec a ; -exec b ;`);
- `_Script`: a string it runs as shell source (`bash -c`, `eval`, `trap`), which
  the walker parses again, one level deeper;
- a `str`: a plain-English reason it cannot be read (an option not known until
  run time, a script from standard input); the line becomes `ask`;
- None: it runs nothing (`sudo -l`, `command -v x`, `env` alone).

To add a wrapper: describe its options with `_Options` (single-letter flags,
letters that take a value, long options with and without one) and add
`"name": _simple(spec, skip=N)` to `_WRAPPERS` when the command follows its
options and N operands (`timeout DURATION CMD` is skip=1). When some option
means it runs nothing, or it runs a script, write a function beside the others
that calls `_parse_options` and returns one of the values above. An option it
does not know is a reason, never skipped: a guess could hide the real command.
Then add the cases to tests/policies/test_shell.py.

Pure functions of a `SimpleCommand`; they never parse shell text themselves.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from governor.policies.shell.result import SimpleCommand
from governor.policies.shell.words import _basename, _short

_SHELLS = frozenset({"bash", "sh", "zsh", "dash", "ksh", "mksh", "ash"})


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
