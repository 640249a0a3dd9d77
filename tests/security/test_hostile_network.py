"""The name decides, and only the name the rules saw reaches the resolver:
attacks on the proxy's DNS, as root and as an unprivileged user.

The proxy (egress_driver.py: the real proxy, the real judge over a real gate
and audit log, the agent's real sandbox) runs in a mount namespace of its
own (bwrap around the driver, nothing else changed) whose
``/etc/resolv.conf`` names a DNS stand-in on loopback (dns_standin.py): the
C library's resolver asks it as it would ask the host's, so each test sees
every query that left the governor and answers as a lying resolver would.
``$A`` is the allowed server's port; a decoy listens on 127.0.0.2:$A, where
the lies point.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import textwrap
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from dns_standin import Standin, resolv_conf
from escape_harness import REPO, TEST_USER, USERS, Account

from governor.sandbox.host.bwrap import locate

DRIVER = Path(__file__).with_name("egress_driver.py")
PY = "/usr/bin/python3"
DECOY = "127.0.0.2"

Run = Callable[..., dict[str, Any]]


@pytest.fixture
def dns() -> Iterator[Standin]:
    """The stand-in resolver (each test gives it its answers)."""
    if os.getuid() != 0:
        pytest.skip("the DNS stand-in listens on port 53: root only")
    with Standin({}) as server:
        yield server


@pytest.fixture(params=USERS)
def attack(request: pytest.FixtureRequest, accounts: dict[str, Account | str], dns: Standin) -> Run:
    account = accounts[request.param]
    if isinstance(account, str):
        pytest.skip(f"{request.param}: {account}")
    assert account.base is not None
    name = request.node.name[-40:].replace("[", "_").replace("]", "_")
    root = account.base / f"dns-{os.getpid()}-{name}"
    root.mkdir()
    os.chown(root, account.uid, account.gid)
    conf = root / "resolv.conf"
    conf.write_text(resolv_conf())
    site = sysconfig.get_paths()["purelib"]
    env = {"PYTHONPATH": f"{REPO}:{REPO}/tests/security:{site}", "PATH": "/usr/bin:/bin",
           "HOME": account.home, "LANG": "C.UTF-8"}  # fmt: skip
    python = os.path.realpath(sys.executable)
    if account.driver is not None:
        python = account.driver.proc.args[-2]
    # The driver's own mount namespace, with only /etc/resolv.conf changed.
    outer = [locate(), "--dev-bind", "/", "/", "--ro-bind", str(conf), "/etc/resolv.conf", "--"]

    def run(script: str, allow: Sequence[str], **extra: Any) -> dict[str, Any]:
        body = {"root": str(root), "script": textwrap.dedent(script), "allow": list(allow),
                "decoys": [DECOY], **extra}  # fmt: skip
        argv = [*outer, python, str(DRIVER)]
        if account.uid != os.getuid():
            argv = ["runuser", "-u", TEST_USER, "--", "env", "-i",
                    *[f"{k}={v}" for k, v in env.items()], *argv]  # fmt: skip
        done = subprocess.run(argv, input=json.dumps(body), capture_output=True, text=True,
                              env=env if account.uid == os.getuid() else None, cwd=root,
                              timeout=180)  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        assert result["uid"] == account.uid
        return result

    return run


def through_proxy(*requests: str) -> str:
    """A script that sends each raw request (``$A`` expanded) to the proxy and
    prints ``name=first line of the answer | body``."""
    calls = "\n".join(f"show({r!r})" for r in requests)
    return f"""{PY} - <<'EOF'
import os, socket
A = os.environ["A"]
def show(text):
    name, _, raw = text.partition("=")
    s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
    s.sendall(raw.replace("$A", A).encode())
    data = b""
    try:
        while chunk := s.recv(65536):
            data += chunk
    except OSError:
        pass
    parts = data.decode(errors="replace").split("\\r\\n")
    print(name + "=" + parts[0] + " | " + parts[-1].strip().replace("\\n", " "))
{calls}
EOF
"""


def tunnel(name: str, host: str) -> str:
    return (
        f"{name}=CONNECT {host}:$A HTTP/1.1\r\nHost: {host}:$A\r\n\r\n"
        "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )


def forwarded(name: str, host: str) -> str:
    return f"{name}=GET http://{host}:$A/ HTTP/1.1\r\nHost: {host}:$A\r\nConnection: close\r\n\r\n"


def lines(result: dict[str, Any]) -> dict[str, str]:
    out = {}
    for line in result["stdout"].splitlines():
        name, sep, value = line.partition("=")
        if sep:
            out[name] = value
    return out


def test_a_trailing_dot_is_the_literal_the_rule_named_and_never_a_dns_query(
    attack: Run, dns: Standin
) -> None:
    dns.answer({"127.0.0.1": DECOY})
    result = attack(
        through_proxy(
            tunnel("dotted_tunnel", "127.0.0.1."),
            forwarded("dotted_plain", "127.0.0.1."),
            tunnel("tunnel", "127.0.0.1"),
        ),
        allow=["127.0.0.1:$A"],
    )
    got = lines(result)
    assert got["dotted_tunnel"].startswith("HTTP/1.1 200") and got["dotted_tunnel"].endswith("allowed"), result
    assert got["dotted_plain"] == "HTTP/1.1 200 OK | allowed", result
    assert got["tunnel"].endswith("allowed"), result
    assert dns.queries == [], dns.queries  # the lie was never asked for
    assert result["hits"] == {"allowed": 3, "unlisted": 0, "udp": 0, "decoy": 0}, result
    records = result["network"]
    assert [r["verdict"] for r in records] == ["allow"] * 3, records
    assert all(r["subject"].get("addresses") == ["127.0.0.1"] for r in records), records


def test_a_name_allowed_exactly_that_resolves_to_loopback_is_refused_unless_the_address_is_named(
    attack: Run, dns: Standin
) -> None:
    dns.answer({"rebind.test": DECOY, "named.test": "127.0.0.1"})
    result = attack(
        through_proxy(
            tunnel("rebind", "rebind.test"),
            forwarded("rebind_plain", "rebind.test"),
            tunnel("named", "named.test"),
        ),
        allow=["rebind.test:$A", "named.test:$A", "127.0.0.1:$A"],
    )
    got = lines(result)
    assert got["rebind"].startswith("HTTP/1.1 403"), result
    assert got["rebind_plain"].startswith("HTTP/1.1 403"), result
    assert got["named"].startswith("HTTP/1.1 200") and got["named"].endswith("allowed"), result
    assert result["hits"]["decoy"] == 0 and result["hits"]["allowed"] == 1, result
    refusals = [r for r in result["network"] if r["verdict"] == "deny"]
    assert len(refusals) == 2, result["network"]
    for record in refusals:
        assert f"resolves to {DECOY}, a loopback address" in record["reason"], record
        assert record["subject"]["addresses"] == [DECOY]
    assert set(dns.names()) == {"rebind.test", "named.test"}


def test_a_refused_name_never_reaches_the_resolver_and_an_allowed_one_does(
    attack: Run, dns: Standin
) -> None:
    dns.answer({"secret-name.test": "127.0.0.1", "allowed.test": "127.0.0.1"})
    result = attack(
        through_proxy(
            tunnel("secret", "secret-name.test"),
            forwarded("secret_plain", "secret-name.test"),
            tunnel("allowed", "allowed.test"),
        ),
        allow=["allowed.test:$A", "127.0.0.1:$A"],
    )
    got = lines(result)
    assert got["secret"].startswith("HTTP/1.1 403") and got["secret_plain"].startswith("HTTP/1.1 403")
    assert got["allowed"].startswith("HTTP/1.1 200") and got["allowed"].endswith("allowed"), result
    assert dns.names() == ["allowed.test"], dns.queries
    assert result["hits"]["allowed"] == 1 and result["hits"]["decoy"] == 0, result
