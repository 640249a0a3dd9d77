"""The agent's model API under governance: which credentials the governor holds
instead of the agent, where each is bound, and what the agent's sandbox gets.

- Held: each of the preset's credential variables the operator set
  (``ANTHROPIC_API_KEY``, ``OPENAI_API_KEY``, ...: its ``env`` names that end in
  ``_KEY`` or ``_TOKEN``, `governor.policies.config_values.is_credential`), when the
  agent runs in its sandbox behind the proxy. Unsandboxed (full access, or
  ``sandbox_agent`` off) the agent has the host's network and no proxy to swap
  in the value: it holds the real key, as before, and the outcome says so.
- Bound to: each key to its own hosts (the preset's ``keys``,
  `governor.agents.presets.KeyHosts`: its API hosts, TLS, and the host of each
  of its base-URL variables set, ``http://`` being plain HTTP: a loopback
  gateway or stand-in), never the union of the preset's hosts: OpenCode's
  Anthropic key never goes to its OpenAI gateway. A credential variable with
  no host of its own is withheld: not in the agent's environment at all, and
  the outcome says so.
- The sandbox gets: each placeholder in place of the value, the trust bundle
  (the system's CAs plus the attempt's) bound read-only in the attempt's own
  folder, and the variables clients read it from (`governor.sandbox.net.tls.trust_env`).
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final

from governor.agents.presets import Preset
from governor.confine.attempt_folders import attempt_folder
from governor.policies.config_values import is_credential
from governor.sandbox.net.credentials import (
    Binding,
    Credential,
    Credentials,
    binding,
    placeholder_for,
    url_binding,
)
from governor.sandbox.net.terminate import Interception, Recorder
from governor.sandbox.net.tls import UPSTREAM_CA_ENV, AttemptCA, trust_env, upstream_context


def bindings(preset: Preset, var: str, env: Mapping[str, str]) -> tuple[Binding, ...]:
    """Where the preset's credential ``var`` may go: its own API hosts and the
    hosts of its own base-URL variables that are set (`Preset.key_hosts`),
    each host with the calls the preset names for it there (Copilot's GitHub
    token on ``api.github.com``: its token exchange, not the token's whole
    authority); none when it has no host of its own (never another key's)."""
    own = preset.key_hosts(var)
    if own is None:
        return ()
    calls = dict(own.calls)
    found = [replace(binding(h), calls=calls.get(h, ())) for h in own.hosts]
    for name in own.base_url:
        value = env.get(name, "")
        if value and (bound := url_binding(value)) is not None:
            found.append(bound)
    return tuple(dict.fromkeys(found))


AGENT_HOLDS_KEYS_ENV: Final = "ACP_GOVERNOR_AGENT_HOLDS_KEYS"
"""The governor's variable that, set to ``1``, gives the agent the real keys
(and no terminated host): for a client that trusts only its own built-in CA
list and so cannot talk through the attempt's CA. The outcome says so."""


def agent_holds_keys() -> bool:
    """Whether the operator chose to give the agent its real keys."""
    return os.environ.get(AGENT_HOLDS_KEYS_ENV) == "1"


def held_credentials(preset: Preset | None, env: Mapping[str, str], *, sandboxed: bool) -> Credentials:
    """The credentials the governor holds for this agent (none unsandboxed,
    without a preset: an argv of one's own names no API hosts, or when the
    operator set `AGENT_HOLDS_KEYS_ENV`)."""
    if preset is None or not sandboxed or agent_holds_keys():
        return Credentials()
    held: list[Credential] = []
    withheld: list[str] = []
    for name in dict.fromkeys(preset.env):
        value = env.get(name)
        if not value or not is_credential(name):
            continue
        bound = bindings(preset, name, env)
        if bound:
            held.append(Credential(name, value, placeholder_for(value), bound))
        else:
            withheld.append(name)
    return Credentials(held, withheld)


@dataclass(frozen=True)
class ModelApi:
    """One attempt's part of the model API: the interception the proxy uses,
    and the trust folder its agent's sandbox sees."""

    interception: Interception
    trust: Path
    """The folder holding the bundle (bound back into the agent's sandbox)."""
    bundle: Path

    def agent_env(self, env: Mapping[str, str]) -> dict[str, str]:
        """The agent's environment: placeholders instead of the real values,
        and the trust variables."""
        return {**self.interception.credentials.sandbox_env(env), **trust_env(str(self.bundle))}


def agent_env(env: Mapping[str, str], held: Credentials, api: ModelApi | None) -> dict[str, str]:
    """The agent's environment: no withheld credential (even when the
    governor holds none for it, and so terminates nothing), the placeholders
    and trust variables when it holds some."""
    return held.sandbox_env(env) if api is None else api.agent_env(env)


def open_model_api(
    credentials: Credentials,
    label: str,
    record: Recorder,
    refusal: Callable[[], str | None] = lambda: None,
    *,
    metered: bool = False,
) -> ModelApi | None:
    """The CA, trust folder and interception of an attempt that holds
    ``credentials`` (None when it holds none: every host stays a tunnel);
    ``metered``: a tokens or cost limit is set (`Interception.metered`)."""
    if not credentials:
        return None
    ca = AttemptCA.make(label)
    trust = attempt_folder("trust-")
    bundle = ca.trust_folder(trust)
    os.chmod(trust, 0o755)  # read by the agent's uid inside the sandbox
    extra = os.environ.get(UPSTREAM_CA_ENV) or None
    interception = Interception(credentials, ca, upstream_context(extra), record, refusal, metered)
    return ModelApi(interception, trust, bundle)


def notices(
    preset: Preset | None, env: Mapping[str, str], held: Credentials, *, sandboxed: bool
) -> list[str]:
    """What the outcome must say of the credentials the agent itself held: the
    real values when it ran outside the sandbox, its login folders when the
    governor held no credential for it (OAuth tokens it refreshes itself)."""
    if preset is None:
        return []
    names = [n for n in preset.env if env.get(n) and is_credential(n)]
    out: list[str] = []
    if names and not sandboxed:
        out.append(
            f"the agent held the real {', '.join(names)}: it ran outside the sandbox, "
            "with no proxy to keep the value from it"
        )
    elif names and not held:
        out.append(
            f"the agent held the real {', '.join(names)}: {AGENT_HOLDS_KEYS_ENV}=1 gave "
            "them to it, and its model calls were not seen on the wire"
        )
    if held.withheld:
        out.append(
            f"the agent was not given {', '.join(held.withheld)}: its preset binds it to no "
            "host of its own (`keys` in presets.toml), and a key is never put into a request "
            "to another key's host"
        )
    if not held:
        homes = [h for h in preset.home_paths(env, Path(env.get("HOME") or "/nonexistent")) if h.exists()]
        if homes:
            shown = ", ".join(str(h) for h in homes[:3])
            out.append(
                f"the agent could read its own login ({shown}): the governor held no "
                "credential for it, so its model calls were not seen on the wire"
            )
    return out


def upstream_problem() -> str | None:
    """Why the extra upstream CA the operator named (`UPSTREAM_CA_ENV`) cannot be
    used, or None: found before the attempt starts, not at its first model call."""
    extra = os.environ.get(UPSTREAM_CA_ENV)
    if not extra:
        return None
    try:
        upstream_context(extra)
    except (OSError, ssl.SSLError) as e:
        why = getattr(e, "strerror", None) or getattr(e, "reason", None) or str(e)
        return f"{UPSTREAM_CA_ENV}={extra}: not a readable PEM CA file ({why})"
    return None
