"""Agent presets: which program is which agent, how to install and sign it in,
and which folders of `$HOME` its sandbox must keep.

Everything here is pure parsing and a PATH lookup: no trio, no subprocess. The
presets live in `presets.toml` at the top of the repository (and travel in the
wheel as package data: `DEFAULT_PATH`); the file is read
strictly, because a misspelt key would otherwise be a silently ignored setting
(a `hom` that leaves the agent without its credentials, a `relocte` that hides
them). Every error is one line naming the file, the preset and the key; the
checker of each key, and the kinds only presets hold, are `governor.agents.preset_values`.

`resolve` prefers a program already on PATH (argv[0], then each alternative),
then the one `governor agents install` put in the governor's data directory
(`governor.agents.npm_installs`), over `npx -y <package>@<version>`: npx needs the
registry, which the agent's sandbox cannot reach, so it is only a fallback,
only where the preset allows it and npx itself is installed, and the governor
fetches the package into npm's cache outside the sandbox before the agent runs
it inside, offline (`governor.agents.npm_installs.fetch_for_npx`).
"""

from __future__ import annotations

import difflib
import functools
import os
import re
import shlex
import shutil
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Final, Literal

from governor.agents.preset_values import (
    _DEFAULTS,
    _SCHEMA,
    _VERSION,
    KeyHosts,
    Relocation,
    _inside,
)
from governor.policies import config_values as values
from governor.policies.errors import ConfigError, toml_error

DEFAULT_PATH: Final = Path(str(resources.files("governor") / "presets.toml"))
"""`presets.toml`, as the package carries it: in a checkout ``governor/presets.toml``
is a link to the one at the top of the repository (where people edit it), and
a wheel holds a copy, so an install that is not editable finds it too."""


NPM_HOME: Final = "~/.npm"
"""npx's cache: kept visible and writable when an agent runs through npx."""

_ID = re.compile(r"[a-z0-9][a-z0-9_-]*\Z")


class PresetError(ValueError):
    """`presets.toml` is malformed, or an agent id names no preset."""




@dataclass(frozen=True)
class Preset:
    """One agent, as `presets.toml` describes it (`{python}` already substituted)."""

    id: str
    name: str
    argv: tuple[str, ...]
    alternatives: tuple[tuple[str, ...], ...]
    package: str | None
    old_packages: tuple[str, ...]
    install: str
    npx: bool
    login: str
    home: tuple[str, ...]
    relocate: tuple[Relocation, ...]
    env: tuple[str, ...]
    notes: str
    model_env: str | None = None
    """The variable the agent reads its model from: how `--model` reaches an agent
    that offers no choice of model over ACP."""
    asking_mode: str | None = None
    """The agent's mode in which it asks before acting, when it has several."""
    alone_env: tuple[str, ...] = ()
    """Variables that make the agent act without asking (``COPILOT_ALLOW_ALL``):
    a job that passes one is refused unless its policy allows mode switches."""
    api_hosts: tuple[str, ...] = ()
    """The model API hosts (``host[:port]`` patterns) its sandbox may reach."""
    base_url_env: tuple[str, ...] = ()
    """Variables holding the agent's API base URL: their host:port is allowed too."""
    keys: tuple[KeyHosts, ...] = ()
    """Each credential variable's own hosts (`KeyHosts`): the governor holds a
    key for the agent and puts it into requests to these only (`key_hosts`)."""
    version: str | None = None
    """The version of `package` that `governor agents install` and npx use."""
    pypi: str | None = None
    """The PyPI distribution that installs argv[0] (``mistral-vibe``), when the
    agent is a Python program: `governor agents install` gives it a venv of its
    own, and `version` pins it. An agent has an npm `package` or this, not both."""
    python: str | None = None
    """The oldest Python (``3.12``) the pinned `pypi` release runs on: the
    install looks for an interpreter at least as new."""
    runs_code: tuple[str, ...] = ()
    """The files and folders of its home folders (``~/...``, each inside a `home`
    entry) that make the host run code later: hooks, MCP server lists, notify
    commands, plugins. Read-only in its sandbox (a missing one cannot be made
    there); one that is a `home` entry itself is a throwaway copy
    (`governor.confine.sandboxes.agent_profile`)."""
    set_env: tuple[tuple[str, str], ...] = ()
    """Variables set for the agent, name and value (an ACP registry entry's
    ``env``: ``AUGMENT_DISABLE_AUTO_UPDATE=1``): what its distribution says it runs with."""
    registry_entry: str | None = None
    """The ACP registry entry it was made from, ``id@version``
    (`governor.agents.registry`): which version of the registry's word it follows."""
    source: str = str(DEFAULT_PATH)
    """The presets file it comes from: the shipped one, or the operator's own
    (`operator_presets_path`)."""

    def key_hosts(self, var: str) -> KeyHosts | None:
        """Where the credential ``var`` may go: its ``keys`` entry; for a preset
        naming one credential variable alone and no ``keys``, the preset's own
        ``api_hosts`` and ``base_url_env`` (they can be no other key's); else
        None: a key with no host of its own, which the agent is not given."""
        for entry in self.keys:
            if entry.var == var:
                return entry
        names = [n for n in self.env if values.is_credential(n)]
        if not self.keys and names == [var]:
            return KeyHosts(var, self.api_hosts, self.base_url_env)
        return None

    def home_paths(self, environ: Mapping[str, str], home: Path) -> tuple[Path, ...]:
        """Where the `home` entries are for a person with this environment and $HOME.

        A relocating variable counts only when it holds an absolute path: the
        agents resolve a relative one against their working directory (or ignore
        it), which is the workspace, already visible.
        """
        out: list[Path] = []
        for entry in self.home:
            place = home / entry.removeprefix("~/")
            for r in self.relocate:
                value = environ.get(r.var, "")
                if r.entry == entry and os.path.isabs(value):
                    place = Path(os.path.normpath(Path(value) / r.sub))
                    break
            if place not in out:
                out.append(place)
        return tuple(out)

    def runs_code_paths(self, environ: Mapping[str, str], home: Path) -> tuple[Path, ...]:
        """Where the `runs_code` entries are: inside their `home` entry's place
        (`home_paths`), wherever a variable moved it."""
        placed = dict(zip(self.home, self.home_paths(environ, home), strict=True))
        out: list[Path] = []
        for path in self.runs_code:
            entry = next(e for e in self.home if _inside(path, e))
            rest = path[len(entry.rstrip("/")) :].strip("/")
            out.append(placed[entry] / rest if rest else placed[entry])
        return tuple(out)


Via = Literal["PATH", "installed", "npx"]
"""How a preset's program was found: on PATH, in the governor's installs, or npx."""


@dataclass(frozen=True)
class Resolved:
    """A preset whose program was found: `argv[0]` is an absolute path."""

    preset: Preset
    argv: tuple[str, ...]
    via: Via = "PATH"

    @property
    def via_npx(self) -> bool:
        """Runs through ``npx``: its sandbox keeps npm's cache, where it was fetched."""
        return self.via == "npx"

    @property
    def home(self) -> tuple[str, ...]:
        """The preset's home entries, plus npx's cache when it runs through npx."""
        return (*self.preset.home, NPM_HOME) if self.via_npx else self.preset.home


@dataclass(frozen=True)
class NotInstalled:
    """A preset none of whose programs is on PATH (nor npx, where allowed)."""

    preset: Preset
    tried: tuple[str, ...]
    install: str
    login: str

    @property
    def message(self) -> str:
        """One line: what is missing, how to install it, how to sign in."""
        from governor.boundary.display import terminal

        # an operator's presets file (hand-written, or an imported entry's words) is text
        # for a terminal: shown, never acted on
        return terminal(
            f"{self.preset.id} is not installed (no {_either(self.tried)} on PATH): "
            f"{self.install}; then sign in: {self.login}"
        )

    def __str__(self) -> str:
        return self.message


# The checkers of a preset's values: `governor.policies.config_values`'s family
# (``check(source, key, value)``, one wording), and the preset's own kinds in it.




def load_presets(text: str | None = None, *, source: str = str(DEFAULT_PATH)) -> dict[str, Preset]:
    """Parse presets (the text given, else the file `source`) strictly.

    Raises `PresetError` naming `source`, the preset and the key for an unknown
    key (with the closest known one), a wrong type, a missing required key, or a
    combination that cannot work (`npx = true` without `package`).
    """
    if text is None:
        try:
            text = Path(source).read_text(encoding="utf-8")
        except OSError as e:
            raise PresetError(f"{source}: cannot read: {e.strerror or e}") from None
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise PresetError(str(toml_error(source, text, e))) from None
    return {pid: _preset(source, pid, table) for pid, table in doc.items()}


def _preset(source: str, pid: str, table: object) -> Preset:
    where = f"{source}: [{pid}]"
    if not _ID.match(pid):
        raise PresetError(f"{where}: a preset id is lowercase letters, digits, - and _")
    if not isinstance(table, dict):
        wrong = values.expected(source, pid, f"a table [{pid}]", values.type_name(table))
        raise PresetError(str(wrong))
    for key in table:
        if key not in _SCHEMA:
            close = difflib.get_close_matches(key, _SCHEMA, n=1)
            hint = f" (did you mean `{close[0]}`?)" if close else f" (known: {', '.join(_SCHEMA)})"
            raise PresetError(f"{where}: unknown key `{key}`{hint}")
    fields: dict[str, Any] = {"id": pid, "source": source}
    for key, (required, check) in _SCHEMA.items():
        if key not in table:
            if required:
                raise PresetError(f"{where}: missing `{key}`")
            fields[key] = _DEFAULTS[key]
            continue
        try:
            fields[key] = check(where, key, table[key])
        except ConfigError as e:  # "FILE: [ID]: KEY: expected ..., got ..."
            raise PresetError(str(e)) from None
    if fields["npx"] and not fields["package"]:
        raise PresetError(f"{where}: `npx = true` needs `package`")
    if fields["package"] and fields["pypi"]:
        raise PresetError(f"{where}: `package` (npm) and `pypi` both install it: keep one")
    if fields["version"] and not (fields["package"] or fields["pypi"]):
        raise PresetError(f"{where}: `version` pins `package` or `pypi`, and neither is there")
    if fields["package"] and fields["version"] and not _VERSION.match(fields["version"]):
        what = "an exact version like 1.2.3 (an npm package's)"
        raise PresetError(
            str(values.expected(where, "version", what, values.shown(fields["version"])))
        )
    if fields["pypi"] and not fields["version"]:
        raise PresetError(f"{where}: `pypi` needs `version`: a Python agent is installed pinned")
    if fields["python"] and not fields["pypi"]:
        raise PresetError(f"{where}: `python` is the oldest Python for `pypi`, which is missing")
    if fields["install"] is None:
        if fields["pypi"]:
            fields["install"] = (
                f"governor agents install {pid} "
                f"(or pipx install {fields['pypi']}=={fields['version']})"
            )
        elif not fields["package"]:
            raise PresetError(f"{where}: say how to install it: `package`, `pypi` or `install`")
        else:
            fields["install"] = (
                f"governor agents install {pid} (or npm install -g {fields['package']})"
            )
    for path in fields["runs_code"]:
        if not any(_inside(path, entry) for entry in fields["home"]):
            raise PresetError(
                f"{where}: `runs_code` names {path!r}, which is in no `home` entry: "
                "the sandbox hides it already"
            )
    for entry in fields["keys"]:
        if entry.var not in fields["env"]:
            raise PresetError(
                f"{where}: `keys.{entry.var}` is not in `env`: the agent is never given it"
            )
        for name in entry.base_url:
            if name not in fields["base_url_env"]:
                raise PresetError(
                    f"{where}: `keys.{entry.var}.base_url` names {name}, not in `base_url_env`: "
                    "its host would not be reachable"
                )
    for r in fields["relocate"]:
        if r.entry not in fields["home"]:
            raise PresetError(f"{where}: `relocate.{r.var}` moves {r.entry!r}, not in `home`")
    return Preset(**fields)


OPERATOR_PRESETS: Final = "presets.toml"


def operator_presets_path(environ: Mapping[str, str] | None = None) -> Path:
    """The operator's own presets: ``$XDG_CONFIG_HOME/acp-governor/presets.toml``
    (an absolute value only, as the XDG spec says), else ``~/.config/...``: an
    agent added with a file (`governor agents import`), not a release of ours."""
    environ = os.environ if environ is None else environ
    xdg = environ.get("XDG_CONFIG_HOME", "")
    base = Path(xdg) if os.path.isabs(xdg) else Path(environ.get("HOME") or Path.home()) / ".config"
    return base / "acp-governor" / OPERATOR_PRESETS


def load_operator_presets(
    path: Path, shipped: Mapping[str, Preset], home: Path | None = None
) -> dict[str, Preset]:
    """The operator's presets file, read as strictly as the shipped one, and
    refused (`PresetError` naming it) when it is not the operator's own (another
    owner, or writable by others: it names the programs the governor starts),
    when it reuses a shipped id, or when a preset's home folders hold the file
    itself: an agent that may write its home would choose what the governor
    runs next."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return {}
    except OSError as e:
        raise PresetError(f"{path}: cannot read: {e.strerror or e} (a link is not followed)") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if st.st_uid != os.getuid() or st.st_mode & 0o022:
            raise PresetError(
                f"{path}: it names the programs the governor starts, so it must be yours and "
                f"writable by you alone (owner uid {st.st_uid}, mode {st.st_mode & 0o777:o})"
            )
        text = f.read().decode("utf-8", errors="replace")
    from governor.sandbox.host.processes import written_places

    real = os.path.realpath(path)
    written = next(iter(written_places().holding(real)), None)
    if written is not None:
        raise PresetError(
            f"{path}: it lies in {written}, a folder an attempt could write: an agent could have "
            "chosen what it names; keep your presets outside every workspace and agent folder"
        )
    mine = load_presets(text, source=str(path))
    home = Path.home() if home is None else home
    for pid, preset in mine.items():
        if pid in shipped:
            raise PresetError(
                f"{path}: [{pid}] is a shipped preset's id: give yours another one "
                "(governor agents import FILE --id NAME)"
            )
        for entry in preset.home:
            place = home / entry.removeprefix("~/")
            if path == place or place in path.parents:
                raise PresetError(
                    f"{path}: [{pid}] `home` has {entry!r}, which holds this file: its agent "
                    "could rewrite which programs the governor starts"
                )
    return mine


@functools.cache
def _default() -> dict[str, Preset]:
    shipped = load_presets()
    return {**shipped, **load_operator_presets(operator_presets_path(), shipped)}


def presets() -> Mapping[str, Preset]:
    """The presets of the repository's `presets.toml` and then the operator's
    own (`operator_presets_path`), read once."""
    return _default()


def preset_ids() -> tuple[str, ...]:
    """The agent ids of `presets.toml`, in file order."""
    return tuple(_default())


def find(agent_id: str, table: Mapping[str, Preset] | None = None) -> Preset:
    """The preset `agent_id`; `PresetError` listing the known ids when there is none."""
    table = presets() if table is None else table
    found = table.get(agent_id)
    if found is None:
        raise PresetError(f"no agent `{agent_id}` ({', '.join(table)})")
    return found


def login_as_found(
    preset: Preset, program: str, which: Callable[[str], str | None] = shutil.which
) -> str:
    """The preset's login line with its program named as it was found: one the
    governor installed (``governor agents install``) is not on ``PATH``, where a
    person would type the bare name and get "command not found"."""
    word, space, rest = preset.login.partition(" ")
    names = {argv[0] for argv in (preset.argv, *preset.alternatives) if argv}
    found = os.path.isabs(program) and os.path.basename(program) == word
    if word in names and found and which(word) != program:
        return f"{shlex.quote(program)}{space}{rest}"
    return preset.login


def resolve(
    preset: Preset,
    which: Callable[[str], str | None] = shutil.which,
    installs: Path | None = None,
) -> Resolved | NotInstalled:
    """Find the program that runs `preset`: PATH, then the governor's installs,
    then npx.

    Tries `argv[0]`, then each alternative's first word, on PATH; then npm's
    link to each of them in ``installs/<id>/node_modules/.bin``, or a Python
    agent's console script in ``installs/<id>/venv/bin`` (where
    `governor agents install` puts the agent; `governor.agents.npm_installs.data_home`);
    then, when the preset allows it and `npx` is on PATH,
    ``npx --offline -y <package>@<version> <argv[1:]>``. The found program's absolute
    path replaces the bare name, so the sandbox can keep its install visible.
    `which` is the PATH lookup (`shutil.which` by default; pass
    `functools.partial(shutil.which, path=...)` for another PATH).
    """
    tried: list[str] = []
    argvs = (preset.argv, *preset.alternatives)
    for argv in argvs:
        found = which(argv[0])
        if found:
            return Resolved(preset, (os.path.abspath(found), *argv[1:]))
        if argv[0] not in tried:
            tried.append(argv[0])
    if installs is not None and (preset.package or preset.pypi):
        bin_dir = installs / preset.id / ("venv/bin" if preset.pypi else "node_modules/.bin")
        for argv in argvs:
            program = bin_dir / argv[0]
            if "/" not in argv[0] and os.access(program, os.X_OK):
                return Resolved(preset, (os.path.abspath(program), *argv[1:]), "installed")
    if preset.npx and preset.package:
        npx = which("npx")
        if npx:
            package = f"{preset.package}@{preset.version}" if preset.version else preset.package
            # --offline: from npm's cache, where the governor fetched it outside
            # the sandbox (which cannot reach the registry) before the agent runs
            argv = (os.path.abspath(npx), "--offline", "-y", package, *preset.argv[1:])
            return Resolved(preset, argv, "npx")
        tried.append("npx")
    return NotInstalled(preset, tuple(tried), preset.install, preset.login)


def _either(names: tuple[str, ...]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


__all__ = [
    "DEFAULT_PATH",
    "NotInstalled",
    "Preset",
    "PresetError",
    "Relocation",
    "Resolved",
    "Via",
    "find",
    "load_presets",
    "preset_ids",
    "presets",
    "resolve",
]
