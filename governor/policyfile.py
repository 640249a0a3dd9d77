"""Reading a job's policy file: the one place a path becomes a `Policy`.

Every surface that takes ``--policy FILE`` (``governor run``, ``check``,
``sandbox``, ``audit replay``, a batch's ``policy`` key) reads it here, so a
file that cannot be used is the same `ConfigError` everywhere, naming the file
and, where there is one, the line and the key: an operator who meets the
message in a batch's report or in ``governor check`` fixes the same thing.
"""

from __future__ import annotations

from pathlib import Path

from policies.errors import ConfigError
from policies.policy import Policy, parse_policy


def read_policy(path: str | Path) -> Policy:
    """The policy in the TOML file at ``path`` (``~`` expanded); `ConfigError`
    naming the file when it cannot be read, is not UTF-8 or is not a valid policy."""
    path = Path(path).expanduser()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(str(path), "", f"cannot read the policy: {e.strerror}") from None
    except UnicodeDecodeError as e:
        line = e.object[: e.start].count(b"\n") + 1
        raise ConfigError(str(path), "", "not UTF-8 text", line=line) from None
    return parse_policy(text, str(path))
