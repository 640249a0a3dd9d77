"""`governor.sandbox.host.toolchains.detect` on real directories laid out as the tools lay them
out: what is kept, why, and what never is."""

from __future__ import annotations

import os
from pathlib import Path

from governor.sandbox.host.toolchains import detect


def _exe(path: Path, text: str = "#!/bin/sh\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def _kept(found: object) -> dict[str, str]:
    return {k.path: k.why for k in found.kept}  # type: ignore[attr-defined]


def test_a_path_entry_keeps_its_prefix(tmp_path: Path) -> None:
    home = tmp_path / "home"
    node = _exe(home / ".nvm" / "versions" / "node" / "v22" / "bin" / "node", "\x7fELF")
    (node.parent.parent / "lib" / "node_modules").mkdir(parents=True)
    found = detect(f"{node.parent}:/usr/bin", {}, homes=[str(home)], roots=[])
    kept = _kept(found)
    # the version's prefix (its lib/node_modules), found on PATH; and $NVM_DIR's
    # default place holds it, so only that outer folder stays in the list
    assert list(kept) == [str(home / ".nvm")]
    assert found.path == f"{node.parent}:/usr/bin"


def test_local_bin_keeps_bin_and_lib_but_not_share(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _exe(home / ".local" / "bin" / "tool")
    (home / ".local" / "lib" / "python3.11").mkdir(parents=True)
    (home / ".local" / "share" / "keyrings").mkdir(parents=True)
    kept = _kept(detect(str(home / ".local" / "bin"), {}, homes=[str(home)], roots=[]))
    assert set(kept) == {str(home / ".local" / "bin"), str(home / ".local" / "lib")}


def test_home_bin_keeps_only_bin(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _exe(home / "bin" / "tool")
    kept = _kept(detect(str(home / "bin"), {}, homes=[str(home)], roots=[]))
    assert list(kept) == [str(home / "bin")]


def test_a_link_and_a_shebang_lead_to_their_installs(tmp_path: Path) -> None:
    home = tmp_path / "home"
    venv = home / ".local" / "share" / "pipx" / "venvs" / "black"
    black = _exe(venv / "bin" / "black")
    (venv / "pyvenv.cfg").write_text(f"home = {home}/.pyenv/versions/3.12.1/bin\n")
    base = _exe(home / ".pyenv" / "versions" / "3.12.1" / "bin" / "python3.12", "\x7fELF")
    other = _exe(home / "opt" / "py" / "bin" / "python", "\x7fELF")
    bin_dir = home / ".local" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "black").symlink_to(black)
    _exe(bin_dir / "script", f"#!{other}\nprint(1)\n")
    kept = _kept(detect(str(bin_dir), {}, homes=[str(home)], roots=[]))
    assert kept[str(venv)] == f"{bin_dir / 'black'} leads there"
    assert kept[str(home / ".pyenv")] == "$PYENV_ROOT's default place"
    assert kept[str(home / "opt" / "py")] == f"{bin_dir / 'script'} leads there"
    assert str(base.parent.parent) not in kept  # inside ~/.pyenv, listed once
    assert not any("keyrings" in k or k == str(home / ".local" / "share") for k in kept)


def _venv(venv: Path, home: Path | None = None, link: Path | None = None) -> None:
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text(f"home = {home}\n" if home else "version = 3.11\n")
    if link is not None:
        (venv / "bin" / "python").symlink_to(link)


def test_a_workspace_venv_keeps_only_an_interpreter_the_host_allows(tmp_path: Path) -> None:
    home, ws = tmp_path / "home", tmp_path / "ws"
    pyenv = _exe(home / ".pyenv" / "versions" / "3.11.9" / "bin" / "python3.11", "\x7fELF")
    _venv(ws / ".venv", pyenv.parent, pyenv)
    # the workspace's word alone: a real interpreter planted in a folder no
    # toolchain rule names (an agent's login folder, a cache, a plain folder)
    for n, folder in enumerate((home / ".claude", home / ".cache" / "x", home / "py" / "3.11")):
        planted = _exe(folder / "bin" / "python3", "\x7fELF")
        _venv(ws / f"env{n}", planted.parent, planted)
    _venv(ws / "linked", link=_exe(home / ".config" / "x" / "python3", "\x7fELF"))
    kept = _kept(detect("/usr/bin", {}, homes=[str(home)], roots=[str(ws)]))
    assert kept == {str(home / ".pyenv"): "$PYENV_ROOT's default place"}


def test_a_variable_is_kept_and_passed_only_when_set(tmp_path: Path) -> None:
    home = tmp_path / "home"
    elsewhere = home / "rust"
    (elsewhere / "toolchains").mkdir(parents=True)
    (home / ".cargo").mkdir(parents=True)
    found = detect("", {"RUSTUP_HOME": str(elsewhere)}, homes=[str(home)], roots=[])
    kept = _kept(found)
    assert kept[str(elsewhere)] == "$RUSTUP_HOME"
    assert kept[str(home / ".cargo")] == "$CARGO_HOME's default place"
    assert dict(found.env) == {"RUSTUP_HOME": str(elsewhere)}


def test_credentials_are_masked_and_credential_folders_never_kept(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _exe(home / ".cargo" / "bin" / "cargo")
    (home / ".cargo" / "credentials.toml").write_text("token")
    nvm = home / ".nvm" / "versions" / "node" / "v22"
    _exe(nvm / "bin" / "node", "\x7fELF")
    (nvm / "etc").mkdir()
    (nvm / "etc" / "npmrc").write_text("//r/:_authToken=x")
    (home / ".docker").mkdir()
    _exe(home / ".docker" / "cli-plugins" / "bin" / "compose")
    found = detect(
        f"{home}/.cargo/bin:{nvm}/bin:{home}/.docker/cli-plugins/bin",
        {},
        homes=[str(home)],
        roots=[],
    )
    assert set(found.masked) == {
        str(home / ".cargo" / "credentials.toml"),
        str(nvm / "etc" / "npmrc"),
    }
    assert not any(k.path.startswith(str(home / ".docker")) for k in found.kept)
    assert f"{home}/.docker" not in found.path  # what is not kept leaves PATH


def test_detection_off_keeps_only_the_operators_folders(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _exe(home / ".local" / "bin" / "tool")
    tools = home / "tools"
    tools.mkdir()
    found = detect(
        f"{home}/.local/bin:/usr/bin",
        {},
        homes=[str(home)],
        roots=[],
        keep=[str(tools)],
        detection=False,
    )
    assert _kept(found) == {str(tools): "named by the policy's [sandbox] keep"}
    assert found.path == "/usr/bin"
    assert found.caches == ()


def test_caches_are_overlaid_only_where_they_exist(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".cache" / "pip").mkdir(parents=True)
    found = detect("", {}, homes=[str(home)], roots=[])
    assert found.caches == (str(home / ".cache" / "pip"),)
    assert detect("", {}, homes=[str(home)], roots=[], overlays=False).caches == ()
    assert os.path.isdir(found.caches[0])
