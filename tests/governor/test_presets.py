"""presets.toml and its reader: strict keys, and finding the program on a real PATH."""

from __future__ import annotations

import functools
import os
import re
import shutil
import stat
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

from governor.agents.presets import (
    DEFAULT_PATH,
    NotInstalled,
    PresetError,
    Resolved,
    find,
    load_presets,
    login_as_found,
    preset_ids,
    presets,
    resolve,
)

REAL_AGENTS = (
    "claude", "codex", "gemini", "opencode", "copilot", "goose", "qwen",
    "vibe", "fast-agent", "cline", "kilo",
)  # fmt: skip

MINIMAL = """
[mine]
name = "Mine"
argv = ["my-agent", "--acp"]
login = "my-agent login"
home = ["~/.mine"]
package = "@me/my-agent"
"""


def _program(directory: Path, name: str) -> Path:
    """A real executable script on disk."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text('#!/bin/sh\necho ran "$0" "$@"\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def _on(*dirs: Path) -> functools.partial[str | None]:
    """`shutil.which` searching only these directories."""
    return functools.partial(shutil.which, path=os.pathsep.join(map(str, dirs)))


def _one(text: str, pid: str = "mine") -> None:
    load_presets(text, source="test.toml")[pid]


def test_every_preset_of_the_repository_parses() -> None:
    presets = load_presets()
    assert set(presets) == {*REAL_AGENTS, "demo"}
    assert preset_ids() == tuple(presets)
    assert DEFAULT_PATH.name == "presets.toml" and DEFAULT_PATH.is_file()


def test_the_package_carries_the_presets_at_the_top_of_the_repository() -> None:
    # found as package data (what a wheel holds), and in a checkout the very
    # file people edit: a copy there would drift from it
    top = Path(__file__).resolve().parents[2] / "presets.toml"
    assert DEFAULT_PATH.parent == Path(str(resources.files("governor")))
    assert DEFAULT_PATH.resolve() == top.resolve()
    assert DEFAULT_PATH.read_bytes() == top.read_bytes()


@pytest.mark.parametrize("pid", REAL_AGENTS)
def test_each_real_agent_has_argv_login_home_and_an_install_line(pid: str) -> None:
    p = find(pid)
    assert p.argv and all(p.argv)
    assert p.login.strip()
    assert p.home and all(h.startswith("~/") for h in p.home)
    assert p.install.strip()
    assert p.name.strip()


def test_agents_are_spawned_through_their_acp_programs_never_the_bare_clis() -> None:
    # `codex` and `claude` are not ACP agents (acp-reference §9).
    assert find("claude").argv == ("claude-agent-acp",)
    assert ("claude-code-acp",) in find("claude").alternatives
    assert find("codex").argv == ("codex-acp",)
    assert find("gemini").argv == ("gemini", "--acp")
    assert find("opencode").argv == ("opencode", "acp")
    assert find("copilot").argv == ("copilot", "--acp", "--no-auto-update")
    assert find("goose").argv == ("goose", "acp")
    assert find("qwen").argv == ("qwen", "--acp")


def test_the_adapters_have_their_current_package_and_the_older_spelling() -> None:
    claude, codex = find("claude"), find("codex")
    assert claude.package == "@agentclientprotocol/claude-agent-acp"
    assert "@zed-industries/claude-agent-acp" in claude.old_packages
    assert "@zed-industries/claude-code-acp" in claude.old_packages
    assert codex.package == "@agentclientprotocol/codex-acp"
    assert codex.old_packages == ("@zed-industries/codex-acp",)
    assert claude.install.endswith("(or npm install -g @agentclientprotocol/claude-agent-acp)")


def test_the_demo_runs_on_the_interpreter_running_the_governor() -> None:
    demo = find("demo")
    assert demo.argv[0] == sys.executable
    assert demo.argv[1].endswith("governor/agents/demo.py") and os.path.isfile(demo.argv[1])
    assert demo.home == ()
    resolved = resolve(demo, which=_on())
    assert isinstance(resolved, Resolved)
    assert resolved.argv[0] == sys.executable and not resolved.via_npx


def test_a_typo_key_is_named_with_the_closest_key() -> None:
    with pytest.raises(PresetError) as e:
        _one(MINIMAL.replace("login =", "logn ="))
    assert str(e.value) == "test.toml: [mine]: unknown key `logn` (did you mean `login`?)"


def test_an_unknown_key_far_from_any_lists_the_known_ones() -> None:
    with pytest.raises(PresetError, match=r"\[mine\]: unknown key `colour` \(known: name, argv"):
        _one(MINIMAL + 'colour = "red"\n')


@pytest.mark.parametrize(
    ("line", "culprit"),
    [
        ('argv = "my-agent"', "argv: expected a non-empty array of non-empty strings (the program, then its arguments), got a string"),
        ("argv = []", "argv: expected a non-empty array of non-empty strings (the program, then its arguments), got an empty array"),
        ('argv = ["my-agent", 3]', "argv: expected a non-empty array of non-empty strings (the program, then its arguments), got an array holding an integer"),
        ('name = ""', "name: expected a non-empty string, got an empty string"),
        ('npx = "yes"', "npx: expected true or false, got a string"),
        ('home = ["/etc"]', "home: expected paths under ~/, got '/etc'"),
        ('home = ["~/../etc"]', "home: expected paths under ~/, got '~/../etc'"),
        ('env = ["NOT A NAME"]', "env: expected environment variable names, got 'NOT A NAME'"),
        ('alternatives = ["x"]', "alternatives[0]: expected a non-empty array of non-empty strings (the program, then its arguments), got a string"),
        ("notes = 3", "notes: expected a string, got an integer"),
        ('relocate = { X = { "~/.mine" = "/abs" } }', "relocate.X: expected relative paths under $X, got '/abs'"),
        ('relocate = { X = "~/.mine" }', "relocate.X: expected"),
        ('set_env = { "A B" = "x" }', "set_env: expected environment variable names and string values, got 'A B' = 'x'"),
        ('registry_entry = "cline"', "registry_entry: expected an ACP registry entry's id@version like cline@3.0.4, got 'cline'"),
    ],
)
def test_a_wrong_type_names_the_preset_and_the_key(line: str, culprit: str) -> None:
    key = line.split(" =")[0]
    lines = [ln for ln in MINIMAL.splitlines() if not ln.startswith(f"{key} =")]
    with pytest.raises(PresetError) as e:
        _one("\n".join([*lines, line]))
    message = str(e.value)
    assert message.startswith("test.toml: [mine]: "), message
    assert culprit in message, message
    assert "\n" not in message


@pytest.mark.parametrize("key", ["name", "argv", "login", "home"])
def test_a_missing_required_key_is_named(key: str) -> None:
    text = "\n".join(ln for ln in MINIMAL.splitlines() if not ln.startswith(f"{key} ="))
    with pytest.raises(PresetError, match=rf"^test\.toml: \[mine\]: missing `{key}`$"):
        _one(text)


def test_combinations_that_cannot_work_are_refused() -> None:
    no_package = MINIMAL.replace('package = "@me/my-agent"', "")
    with pytest.raises(PresetError, match="`npx = true` needs `package`"):
        _one(no_package + "npx = true\n")
    with pytest.raises(PresetError, match="say how to install it"):
        _one(no_package)
    with pytest.raises(PresetError, match=r"`relocate.X` moves '~/.other', not in `home`"):
        _one(MINIMAL + 'relocate = { X = { "~/.other" = "." } }\n')
    # An explicit install line stands in for a package.
    assert load_presets(no_package + 'install = "make install"\n')["mine"].install == "make install"


def test_a_preset_must_be_a_table_with_a_plain_id() -> None:
    with pytest.raises(
        PresetError, match=r"^test\.toml: mine: expected a table \[mine\], got a string$"
    ):
        load_presets('mine = "x"\n', source="test.toml")
    with pytest.raises(PresetError, match=r"\[My Agent\]: a preset id is lowercase"):
        load_presets(MINIMAL.replace("[mine]", '["My Agent"]'), source="test.toml")


def test_bad_toml_and_a_missing_file_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(PresetError, match=r"^test\.toml: "):
        load_presets("[mine\n", source="test.toml")
    missing = tmp_path / "nope.toml"
    with pytest.raises(PresetError, match=rf"^{missing}: cannot read"):
        load_presets(source=str(missing))
    written = tmp_path / "presets.toml"
    written.write_text(MINIMAL)
    assert list(load_presets(source=str(written))) == ["mine"]


def test_an_unknown_agent_id_lists_the_known_ones() -> None:
    with pytest.raises(PresetError, match=r"^no agent `gpt` \(claude, codex, gemini, "):
        find("gpt")


def test_resolve_finds_the_program_on_the_path(tmp_path: Path) -> None:
    program = _program(tmp_path / "bin", "claude-agent-acp")
    resolved = resolve(find("claude"), which=_on(tmp_path / "bin"))
    assert isinstance(resolved, Resolved)
    assert resolved.argv == (str(program),)
    assert not resolved.via_npx
    assert resolved.home == ("~/.claude", "~/.claude.json")
    # The argv it gives really runs.
    out = subprocess.run([*resolved.argv, "x"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"ran {program} x"


def test_resolve_keeps_the_agents_arguments_after_the_found_program(tmp_path: Path) -> None:
    program = _program(tmp_path / "bin", "gemini")
    resolved = resolve(find("gemini"), which=_on(tmp_path / "bin"))
    assert isinstance(resolved, Resolved)
    assert resolved.argv == (str(program), "--acp")


def test_resolve_falls_back_to_an_alternative_program(tmp_path: Path) -> None:
    old = _program(tmp_path / "bin", "claude-code-acp")
    _program(tmp_path / "bin", "npx")
    resolved = resolve(find("claude"), which=_on(tmp_path / "bin"))
    assert isinstance(resolved, Resolved)
    assert resolved.argv == (str(old),) and not resolved.via_npx


def test_resolve_prefers_the_path_over_npx(tmp_path: Path) -> None:
    # npx earlier on PATH than the agent still loses to the agent.
    _program(tmp_path / "a", "npx")
    program = _program(tmp_path / "b", "codex-acp")
    resolved = resolve(find("codex"), which=_on(tmp_path / "a", tmp_path / "b"))
    assert isinstance(resolved, Resolved)
    assert resolved.argv == (str(program),) and not resolved.via_npx


def test_resolve_falls_back_to_npx_only_when_the_preset_allows_it(tmp_path: Path) -> None:
    npx = _program(tmp_path / "bin", "npx")
    on_path = _on(tmp_path / "bin")
    gemini = resolve(find("gemini"), which=on_path)
    assert isinstance(gemini, Resolved) and gemini.via_npx
    version = find("gemini").version
    assert version is not None  # pinned: npx never runs whatever the registry serves today
    assert gemini.argv == (str(npx), "--offline", "-y", f"@google/gemini-cli@{version}", "--acp")
    assert gemini.home == ("~/.gemini", "~/.npm")
    # Goose is not on npm: npx on PATH does not stand in for it.
    goose = resolve(find("goose"), which=on_path)
    assert isinstance(goose, NotInstalled)
    assert goose.tried == ("goose",)


def _governor_install(installs: Path, pid: str, program: str) -> Path:
    """What `governor agents install` leaves: npm's link in the folder's .bin."""
    return _program(installs / pid / "node_modules" / ".bin", program)


def test_resolve_looks_on_the_path_then_in_the_governors_installs_then_npx(tmp_path: Path) -> None:
    installs = tmp_path / "data"
    npx = _program(tmp_path / "bin", "npx")
    claude = find("claude")
    via_npx = resolve(claude, which=_on(tmp_path / "bin"), installs=installs)
    assert isinstance(via_npx, Resolved) and via_npx.via == "npx" and via_npx.argv[0] == str(npx)
    mine = _governor_install(installs, "claude", "claude-agent-acp")
    installed = resolve(claude, which=_on(tmp_path / "bin"), installs=installs)
    assert isinstance(installed, Resolved) and installed.via == "installed"
    assert installed.argv == (str(mine),) and not installed.via_npx
    on_path = _program(tmp_path / "bin", "claude-agent-acp")
    found = resolve(claude, which=_on(tmp_path / "bin"), installs=installs)
    assert isinstance(found, Resolved) and found.via == "PATH" and found.argv == (str(on_path),)


def test_an_install_of_another_agent_does_not_stand_in(tmp_path: Path) -> None:
    installs = tmp_path / "data"
    _governor_install(installs, "codex", "claude-agent-acp")  # in codex's folder
    (tmp_path / "empty").mkdir()
    assert isinstance(resolve(find("claude"), _on(tmp_path / "empty"), installs), NotInstalled)
    # the same program in claude's folder, with its arguments kept after it
    _governor_install(installs, "gemini", "gemini")
    gemini = resolve(find("gemini"), _on(tmp_path / "empty"), installs)
    assert isinstance(gemini, Resolved) and gemini.argv[1:] == ("--acp",)


def test_a_version_is_an_exact_one_and_pins_a_package() -> None:
    with pytest.raises(PresetError, match=r"version: expected an exact version like 1.2.3, got '\^1.2'"):
        _one(MINIMAL + 'version = "^1.2"\n')
    no_package = MINIMAL.replace('package = "@me/my-agent"\n', 'install = "get it"\n')
    with pytest.raises(PresetError, match="`version` pins `package` or `pypi`, and neither is there"):
        _one(no_package + 'version = "1.2.3"\n')
    assert load_presets(MINIMAL + 'version = "1.2.3-rc.1"\n')["mine"].version == "1.2.3-rc.1"


@pytest.mark.parametrize("pid", [p for p in REAL_AGENTS if find(p).npx])
def test_every_agent_npx_may_run_has_a_pinned_version(pid: str) -> None:
    assert find(pid).version is not None


def test_nothing_found_reports_the_install_and_login_commands(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    missing = resolve(find("claude"), which=_on(empty))
    assert isinstance(missing, NotInstalled)
    assert missing.tried == ("claude-agent-acp", "claude-code-acp", "npx")
    install = "governor agents install claude (or npm install -g @agentclientprotocol/claude-agent-acp)"
    assert missing.install == install
    assert str(missing) == (
        "claude is not installed (no claude-agent-acp, claude-code-acp or npx on PATH): "
        f"{install}; "
        f"then sign in: {find('claude').login}"
    )
    goose = resolve(find("goose"), which=_on(empty))
    assert isinstance(goose, NotInstalled)
    assert goose.message.startswith(
        "goose is not installed (no goose on PATH): install the goose CLI"
    )
    assert goose.message.endswith("then sign in: goose configure")


def test_a_file_that_is_not_executable_is_not_a_program(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "opencode").write_text("#!/bin/sh\n")
    assert isinstance(resolve(find("opencode"), which=_on(tmp_path / "bin")), NotInstalled)


def test_home_entries_follow_the_variables_that_relocate_them(tmp_path: Path) -> None:
    home = Path("/home/u")
    claude = find("claude")
    assert claude.home_paths({}, home) == (home / ".claude", home / ".claude.json")
    assert claude.home_paths({"CLAUDE_CONFIG_DIR": "/c"}, home) == (
        Path("/c"),
        Path("/c/.claude.json"),
    )
    assert find("gemini").home_paths({"GEMINI_CLI_HOME": "/g"}, home) == (Path("/g/.gemini"),)
    assert find("codex").home_paths({"CODEX_HOME": "/x/codex"}, home) == (Path("/x/codex"),)
    # A relative value is not followed: the agent would resolve it inside the workspace.
    assert find("codex").home_paths({"CODEX_HOME": "rel"}, home) == (home / ".codex",)
    # The first variable listed wins: GOOSE_PATH_ROOT over XDG_CONFIG_HOME.
    goose = find("goose")
    assert goose.home_paths({"XDG_CONFIG_HOME": "/cfg"}, home) == (
        Path("/cfg/goose"),
        home / ".local/share/goose",
        home / ".local/state/goose",
    )
    assert goose.home_paths({"XDG_CONFIG_HOME": "/cfg", "GOOSE_PATH_ROOT": "/r"}, home) == (
        Path("/r/config"),
        Path("/r/data"),
        Path("/r/state"),
    )


def test_the_login_line_names_an_installed_agent_by_its_path_when_path_does_not_find_it() -> None:
    claude = find("claude")
    installed = "/data/acp-governor/agents/claude/node_modules/.bin/claude-agent-acp"
    line = login_as_found(claude, installed, which=lambda _: None)
    assert line == claude.login.replace("claude-agent-acp", installed, 1)
    assert line.startswith(f"{installed} --cli auth login --claudeai")
    # found on PATH, or run through npx: the preset's own words run as they are
    assert login_as_found(claude, installed, which=lambda _: installed) == claude.login
    assert login_as_found(claude, "/usr/bin/npx", which=lambda _: None) == claude.login
    spaced = "/my agents/claude-agent-acp"
    assert login_as_found(claude, spaced, which=lambda _: None).startswith(f"'{spaced}' --cli")


def test_what_runs_code_lies_inside_a_home_entry_and_under_home() -> None:
    with pytest.raises(PresetError, match=r"runs_code: expected paths under ~/, got '/etc/x'"):
        _one(MINIMAL + 'runs_code = ["/etc/x"]\n')
    with pytest.raises(
        PresetError, match=r"`runs_code` names '~/.bashrc', which is in no `home` entry"
    ):
        _one(MINIMAL + 'runs_code = ["~/.bashrc"]\n')
    # a prefix of a name is not its folder
    with pytest.raises(PresetError, match=r"names '~/.mine-x/hooks', which is in no `home`"):
        _one(MINIMAL + 'runs_code = ["~/.mine-x/hooks"]\n')
    mine = load_presets(MINIMAL + 'runs_code = ["~/.mine/hooks"]\n', source="test.toml")["mine"]
    assert mine.runs_code == ("~/.mine/hooks",)


def test_every_preset_with_a_writable_home_names_what_in_it_runs_code() -> None:
    for preset in presets().values():
        assert bool(preset.runs_code) == bool(preset.home), preset.id
    claude = find("claude")
    assert {"~/.claude/settings.json", "~/.claude.json"} <= set(claude.runs_code)
    assert "~/.codex/config.toml" in find("codex").runs_code
    assert "~/.gemini/settings.json" in find("gemini").runs_code
    assert "~/.qwen/settings.json" in find("qwen").runs_code


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ('package = "x"\npypi = "x"\nversion = "1.0.0"', "`package` (npm) and `pypi` both install it"),
        ('pypi = "x"', "`pypi` needs `version`: a Python agent is installed pinned"),
        ('python = "3.12"\ninstall = "by hand"', "`python` is the oldest Python for `pypi`"),
        ('package = "x"\nversion = "6.1"', "version: expected an exact version like 1.2.3 (an npm package's), got '6.1'"),
        ('pypi = "x y"\nversion = "1.0"', "pypi: expected a PyPI project name like mistral-vibe, got 'x y'"),
    ],
)
def test_a_python_agent_is_pinned_by_pypi_and_version_and_never_also_an_npm_one(
    extra: str, says: str
) -> None:
    with pytest.raises(PresetError, match=re.escape(says)):
        _one(MINIMAL.replace('package = "@me/my-agent"\n', "") + extra)


def test_a_python_agent_s_release_may_be_any_exact_pep_440_version() -> None:
    p = load_presets(MINIMAL.replace('package = "@me/my-agent"\n', "") + 'pypi = "cowsay"\nversion = "6.1"\npython = "3.11"', source="t")
    assert (p["mine"].pypi, p["mine"].version, p["mine"].python) == ("cowsay", "6.1", "3.11")
    assert p["mine"].install == "governor agents install mine (or pipx install cowsay==6.1)"
