"""Which of an agent's permission options answers a verdict, and whether a mode
asks before acting: both judged by effect.

Agents offer options with agent-specific ids (Claude ``allow``/``allow_always``/
``reject``; Gemini ``proceed_once``/``cancel``; Codex ``allow_permissions_session``
...), so we choose by ``kind`` -- and by *effect*: an option whose kind says
``allow_once`` may still switch the agent into a mode where it stops asking
(Claude's ExitPlanMode offers ``bypassPermissions`` and ``acceptEdits``). Such
an option would end governance for the rest of the attempt, so it is refused
unless the policy allows mode switches; ``allow_always`` is never chosen, since
it stops the agent asking about that tool at all.

The same words decide whether a session mode asks (`mode_asks`): one list of
what "acts without asking" looks like in an id or a name (`_ALONE`), so an
option and a mode that say the same thing are judged the same.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from governor.policies.rules import Verdict

# Words in an id or a name that mean "acts without asking" (modes and options alike).
_ALONE_WORDS: Final = (
    r"bypass|accept.?edits|dont.?ask|don't ask|yolo|auto|full.?access|"
    r"skip.?permission|without (?:asking|approval)"
)
# An option also stops the agent asking when it lasts: always, this session, remember.
_STOPS_ASKING: Final = re.compile(_ALONE_WORDS + r"|always|session|trust|remember", re.IGNORECASE)
_ALONE: Final = re.compile(_ALONE_WORDS, re.IGNORECASE)
"""A mode named for the agent itself says nothing either way: Copilot's ``#agent``
asks before it acts, its ``#autopilot`` does not."""
_ASKS: Final = re.compile(
    r"(?i)^(default|ask|read-only|readonly|manual|normal)$|requires? approval|ask(s)? (before|first|for)"
)


@dataclass(frozen=True, slots=True)
class Option:
    """One ``PermissionOption`` as the agent offered it."""

    option_id: str
    name: str
    kind: str


@dataclass(frozen=True, slots=True)
class Choice:
    """The option to answer with, or None for the ``cancelled`` outcome; and why."""

    option_id: str | None
    reason: str


CACHED_TEXT: Final = 256
"""Options whose id and name are longer together are judged afresh each time:
the caches hold what agents send, and must not hold much of it."""


def stops_asking(option: Option) -> bool:
    """Whether choosing this option would let the agent act without asking later."""
    if len(option.option_id) + len(option.name) > CACHED_TEXT:
        return _stops_asking(option)
    return _stops_asking_cached(option)


def _stops_asking(option: Option) -> bool:
    return option.kind == "allow_always" or bool(
        _STOPS_ASKING.search(option.option_id) or _STOPS_ASKING.search(option.name)
    )


_stops_asking_cached = functools.lru_cache(maxsize=1024)(_stops_asking)
"""An agent offers the same few options every time."""


def choose(
    options: Sequence[Option], verdict: Verdict, *, allow_mode_switch: bool = False
) -> Choice:
    """The conservative answer to a permission request under a final verdict.

    allow -> the first ``allow_once`` that does not stop the agent asking (or, if
    the policy allows mode switches, one that does -- never ``allow_always``);
    deny -> the first ``reject_once``; nothing fitting -> cancelled.
    """
    if verdict is Verdict.ALLOW:
        once = [o for o in options if o.kind == "allow_once"]
        for o in once:
            if not stops_asking(o):
                return Choice(o.option_id, f"allow once: {o.name or o.option_id}")
        if allow_mode_switch and once:
            o = once[0]
            return Choice(
                o.option_id,
                f"allow once (switches mode, the policy allows it): {o.name or o.option_id}",
            )
        if once:
            return Choice(
                None, "every allow option would let the agent stop asking; answered cancelled"
            )
        return Choice(None, "the agent offered no allow-once option; answered cancelled")
    for o in options:
        if o.kind == "reject_once":
            return Choice(o.option_id, f"reject once: {o.name or o.option_id}")
    return Choice(None, "the agent offered no reject-once option; answered cancelled")


def choose_offered(
    offered: tuple[tuple[str, str, str], ...], verdict: Verdict, allow_mode_switch: bool
) -> Choice:
    """`choose` among options given as ``(option_id, name, kind)`` tuples; the
    same few options, offered again and again, are chosen among once."""
    if sum(len(i) + len(n) for i, n, _ in offered) > CACHED_TEXT * 4:
        return _choose_offered(offered, verdict, allow_mode_switch)
    return _choose_offered_cached(offered, verdict, allow_mode_switch)


def _choose_offered(
    offered: tuple[tuple[str, str, str], ...], verdict: Verdict, allow_mode_switch: bool
) -> Choice:
    return choose([Option(*o) for o in offered], verdict, allow_mode_switch=allow_mode_switch)


_choose_offered_cached = functools.lru_cache(maxsize=256)(_choose_offered)


def mode_asks(mode_id: str | None, mode: object = None) -> bool | None:
    """Whether a session mode asks before acting: True, False, or None when it
    cannot be told. `mode` is the agent's ``SessionMode`` (its name and
    description are read too), or None when only the id is known."""
    if mode_id is None:
        return None
    text = " ".join(
        str(part)
        for part in (mode_id, getattr(mode, "name", None), getattr(mode, "description", None))
        if part
    )
    if _ALONE.search(mode_id) or (_ALONE.search(text) and not _ASKS.search(mode_id)):
        return False
    if _ASKS.search(mode_id) or _ASKS.search(text) or mode_id == "plan":
        return True
    return None
