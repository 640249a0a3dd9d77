"""Fixtures of the escape suite; the machinery is in escape_harness.py."""

from __future__ import annotations

import hashlib
import os
import pwd
import re
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from escape_harness import USERS, VIAS, Account, Box, unprivileged_account


@pytest.fixture(scope="session")
def session_base() -> Iterator[Path]:
    base = Path(tempfile.mkdtemp(prefix="govsec-", dir="/tmp"))
    base.chmod(0o755)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def _account_base(account: Account, token: str) -> Path:
    """Per-account scratch space inside that account's real home, *not* under
    /tmp: a fake home or sibling under /tmp would be hidden by the private /tmp
    anyway, and the tests could not tell whether the home tmpfs and the
    read-only root do their job."""
    cache = Path(account.home) / ".cache"
    if not cache.exists():
        cache.mkdir(mode=0o755)
        os.chown(cache, account.uid, account.gid)
    base = cache / f"govtest-{token}"
    base.mkdir(mode=0o755)
    os.chown(base, account.uid, account.gid)
    return base


@pytest.fixture(scope="session")
def accounts(session_base: Path) -> Iterator[dict[str, Account | str]]:
    found: dict[str, Account | str] = {}
    if os.getuid() == 0:
        entry = pwd.getpwuid(0)
        found["root"] = Account("root", 0, 0, entry.pw_dir, None)
    else:
        found["root"] = "the suite is not running as root"
    found["unprivileged"] = unprivileged_account(session_base)
    bases: dict[str, Path] = {}
    token = session_base.name.split("-", 1)[1]
    for user, account in found.items():
        if isinstance(account, Account):
            bases[user] = _account_base(account, token)
    yield {
        user: replace(account, base=bases[user]) if isinstance(account, Account) else account
        for user, account in found.items()
    }
    for account in found.values():
        if isinstance(account, Account) and account.driver is not None:
            account.driver.close()
    for base in bases.values():
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(params=[f"{user}-{via}" for user in USERS for via in VIAS])
def box(request: pytest.FixtureRequest, accounts: dict[str, Account | str]) -> Box:
    user, via = request.param.split("-")
    account = accounts[user]
    if isinstance(account, str):
        pytest.skip(f"{user}: {account}")
    # short: Unix socket paths inside the workspace must stay under 108 bytes
    digest = hashlib.sha1(request.node.name.encode()).hexdigest()[:6]
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", request.node.name)[5:30] + "-" + digest
    assert account.base is not None
    return Box(user, account, account.base / name, via)


