"""Which operator ceiling is in force, and where it came from.

Order: ``--ceiling FILE``, else ``$ACP_GOVERNOR_CEILING``, else
``/etc/acp-governor/ceiling.toml``, else ``~/.config/acp-governor/ceiling.toml``,
else the built-in default (edit-workspace, every preset agent, a custom ACP
argv and a plain command, no raw agent args, no network for commands).
"""

from __future__ import annotations

import os
from pathlib import Path

from governor.boundary.person_files import read_input_text
from governor.policies.ceiling import CUSTOM_AGENT, CUSTOM_COMMAND, Ceiling, parse_ceiling
from governor.policies.errors import ConfigError
from governor.sandbox.host.processes import written_places

SYSTEM_CEILING = Path("/etc/acp-governor/ceiling.toml")


def default_ceiling() -> Ceiling:
    """The built-in ceiling: every preset agent and a custom ACP argv."""
    from governor.agents.presets import preset_ids

    return Ceiling.default((*preset_ids(), CUSTOM_AGENT, CUSTOM_COMMAND))


def candidates(explicit: str | None) -> list[tuple[str, Path]]:
    """Where a ceiling is looked for, in order, each with how it was named."""
    found: list[tuple[str, Path]] = []
    if explicit:
        found.append(("--ceiling", Path(explicit)))
    env = os.environ.get("ACP_GOVERNOR_CEILING")
    if env:
        found.append(("$ACP_GOVERNOR_CEILING", Path(env)))
    found.append(("system", SYSTEM_CEILING))
    found.append(("user", Path.home() / ".config" / "acp-governor" / "ceiling.toml"))
    return found


def load_ceiling(explicit: str | None = None) -> Ceiling:
    """The ceiling in force. An explicitly named file that is missing is an error;
    the system and user files are optional."""
    for how, path in candidates(explicit):
        optional = how in ("system", "user")
        try:
            text = read_input_text(path, written=written_places())
        except FileNotFoundError:
            if optional:
                continue
            raise ConfigError(str(path), "", f"the ceiling named by {how} does not exist") from None
        except OSError as e:
            raise ConfigError(str(path), "", f"cannot read the ceiling: {e.strerror}") from None
        return parse_ceiling(text, source=f"{path} ({how})")
    return default_ceiling()
