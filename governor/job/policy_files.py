"""Reading a job's policy: the one place a ``--policy`` value becomes a `Policy`.

Every surface that takes ``--policy`` (``governor run``, ``check``,
``sandbox``, ``audit replay``, a batch's ``policy`` key, the library's
``AttemptSpec.policy``) reads it here, so a value that cannot be used is the
same `ConfigError` everywhere, naming the file and, where there is one, the
line and the key: an operator who meets the message in a batch's report or in
``governor check`` fixes the same thing.

A value is a path, or the name of a policy shipped in the ``policies``
package (``edit-workspace`` for ``policies/edit-workspace.toml``), so that
``governor run --policy edit-workspace`` works from any folder and from a
wheel. A name is a bare word: no ``/`` and no ``.toml``. That is decided by
the value alone, never by what the current folder holds: a file called
``read-only`` in a cloned repository cannot stand in for the shipped policy
(``./read-only`` reads that file).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from governor.boundary.person_files import read_input_text
from governor.policies.errors import ConfigError, closest
from governor.policies.policy import Policy, parse_policy
from governor.sandbox.host.processes import written_places


def shipped_policies() -> dict[str, Path]:
    """The policies shipped in the ``policies`` package, by name (the file's stem)."""
    folder = resources.files("governor.policies")
    found = (Path(str(entry)) for entry in folder.iterdir() if entry.name.endswith(".toml"))
    return {path.stem: path for path in sorted(found)}


def is_policy_name(value: str) -> bool:
    """Whether ``value`` is written as a shipped policy's name rather than a path:
    a bare word, no ``/``, no ``~`` and no ``.toml``."""
    return bool(value) and "/" not in value and value[0] != "~" and not value.endswith(".toml")


def shipped_name(value: str) -> Path | None:
    """The shipped policy ``value`` names (`is_policy_name`), or None."""
    return shipped_policies().get(value) if is_policy_name(value) else None


def policy_path(value: str | Path) -> Path:
    """The file a ``--policy`` value stands for: a shipped policy by its name
    (``edit-workspace``), else the path (``~`` expanded). `ConfigError` for a
    name that is no shipped policy and no file, naming the shipped ones."""
    if isinstance(value, str) and is_policy_name(value):
        shipped = shipped_policies()
        if value in shipped:
            return shipped[value]
        if not Path(value).is_file():
            names = ", ".join(shipped)
            hint = closest(value, shipped)
            raise ConfigError(
                value,
                "",
                f"no such policy file, and no shipped policy of that name: give a path to a "
                f"policy file, or a shipped policy's name ({names})"
                + (f"; did you mean {hint!r}?" if hint else ""),
            )
    return Path(value).expanduser()


def read_policy(value: str | Path) -> Policy:
    """The policy a ``--policy`` value names (`policy_path`); `ConfigError`
    naming the file when it cannot be read, is not UTF-8 or is not a valid policy."""
    path = policy_path(value)
    try:  # never through a link an attempt could have made out of its folders
        text = read_input_text(path, written=written_places())
    except OSError as e:
        raise ConfigError(str(path), "", _unreadable(path, e)) from None
    except UnicodeDecodeError as e:
        line = e.object[: e.start].count(b"\n") + 1
        raise ConfigError(str(path), "", "not UTF-8 text", line=line) from None
    return parse_policy(text, str(path))


def _unreadable(path: Path, error: OSError) -> str:
    """Why the file cannot be read, with the shipped names when a missing file's
    name is close to one (``edit-workspace.toml`` from outside the checkout)."""
    said = f"cannot read the policy: {error.strerror}"
    if path.exists():
        return said
    shipped = shipped_policies()
    hint = closest(path.stem, shipped)
    names = ", ".join(shipped)
    if hint is not None:
        return f"{said}; the shipped policy {hint!r} is found by its name alone: --policy {hint}"
    return f"{said}; the shipped policies are found by name: {names}"
