"""Network attacks from inside the agent's sandbox, as root and as an unprivileged user.

Each attack has its allowed neighbour (the same move towards the allowed
server, which must work), the unlisted server must never be reached, and
every refusal the proxy gave is a ``network`` record of the audit log. The
machinery (servers, real proxy, real gate and log, real bwrap) is
egress_driver.py; ``$A`` is the allowed port, ``$B`` the unlisted one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from escape_harness import REPO, TEST_USER, USERS, Account

DRIVER = Path(__file__).with_name("egress_driver.py")
PY = "/usr/bin/python3"

Run = Callable[..., dict[str, Any]]


@pytest.fixture(params=USERS)
def attack(request: pytest.FixtureRequest, accounts: dict[str, Account | str], tmp_path: Path) -> Run:
    account = accounts[request.param]
    if isinstance(account, str):
        pytest.skip(f"{request.param}: {account}")
    assert account.base is not None
    root = account.base / f"net-{os.getpid()}-{request.node.name[-40:]}".replace("[", "_").replace("]", "_")
    root.mkdir()
    os.chown(root, account.uid, account.gid)
    site = sysconfig.get_paths()["purelib"]
    env = {"PYTHONPATH": f"{REPO}:{REPO}/tests/security:{site}", "PATH": "/usr/bin:/bin",
           "HOME": account.home, "LANG": "C.UTF-8"}  # fmt: skip
    python = os.path.realpath(sys.executable)
    if account.driver is not None:  # the interpreter the escape harness found usable for it
        python = account.driver.proc.args[-2]

    def run(script: str, allow: Sequence[str] = ("127.0.0.1:$A",), **extra: Any) -> dict[str, Any]:
        body = {"root": str(root), "script": textwrap.dedent(script), "allow": list(allow), **extra}
        argv = [python, str(DRIVER)]
        if account.uid != os.getuid():
            argv = ["runuser", "-u", TEST_USER, "--", "env", "-i",
                    *[f"{k}={v}" for k, v in env.items()], *argv]  # fmt: skip
        outer = env if account.uid == os.getuid() else None  # runuser is under /usr/sbin
        done = subprocess.run(argv, input=json.dumps(body), capture_output=True, text=True,
                              env=outer, cwd=root, timeout=180)  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        assert result["uid"] == account.uid
        return result

    return run


def lines(result: dict[str, Any]) -> dict[str, str]:
    """``name=value`` lines the script printed."""
    out = {}
    for line in result["stdout"].splitlines():
        name, sep, value = line.partition("=")
        if sep:
            out[name] = value
    return out


def refused(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in result["network"] if r["verdict"] == "deny"]


CURL = "curl -s -m 10 -o /dev/null -w '%{http_code}'"
PROXIED = f"{CURL} --noproxy ''"
"""curl through the proxy even for loopback, which NO_PROXY sends past it (to
the forwards inside): the proxy's own judgement of a loopback name, as a
client that ignores NO_PROXY meets it."""
RAW = f"""{PY} - <<'EOF'
import os, socket, sys
def raw(host, port, payload, read=True):
    try:
        s = socket.create_connection((host, port), timeout=5)
    except OSError as e:
        return f"error:{{type(e).__name__}}"
    s.sendall(payload)
    data = b""
    try:
        while read:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    except OSError as e:
        data += f" error:{{type(e).__name__}}".encode()
    return data.decode(errors="replace").replace("\\r\\n", " | ").replace("\\n", " ")
A, B = int(os.environ["A"]), int(os.environ["B"])
%s
EOF
"""


def test_an_unlisted_loopback_port_is_reached_by_no_route_and_the_allowed_one_is(attack: Run) -> None:
    result = attack(f"""
        echo "proxied_a=$({PROXIED} http://127.0.0.1:$A/)"
        echo "proxied_b=$({PROXIED} http://127.0.0.1:$B/)"
        echo "direct_b=$({CURL} http://127.0.0.1:$B/)"
        echo "noproxy_a=$({CURL} --noproxy '*' http://127.0.0.1:$A/)"
        echo "noproxy_b=$({CURL} --noproxy '*' http://127.0.0.1:$B/)"
        echo "cleared_b=$(env -u ALL_PROXY -u all_proxy -u HTTP_PROXY -u http_proxy -u HTTPS_PROXY -u https_proxy {CURL} http://127.0.0.1:$B/)"
        """ + RAW % 'print("raw_a=" + raw("127.0.0.1", A, b"GET / HTTP/1.0\\r\\n\\r\\n")[:15]); print("raw_b=" + raw("127.0.0.1", B, b"GET / HTTP/1.0\\r\\n\\r\\n"))')
    got = lines(result)
    assert (got["proxied_a"], got["noproxy_a"]) == ("200", "200"), result
    assert got["raw_a"].startswith("HTTP/1.1 200"), result
    assert got["proxied_b"] == "403", result
    assert got["noproxy_b"] == got["direct_b"] == got["cleared_b"] == "000", result
    assert got["raw_b"] == "error:ConnectionRefusedError", result
    assert result["hits"]["unlisted"] == 0 and result["hits"]["allowed"] == 3, result
    (deny,) = refused(result)
    assert deny["subject"]["port"] == result["ports"][1]
    assert deny["rule"] == "network.special" and "--allow-host 127.0.0.1:" in deny["reason"]


def test_an_ip_literal_is_judged_as_the_ip_and_localhost_is_not_127_0_0_1(attack: Run) -> None:
    # the rule names localhost: the proxy resolves it (on the host) and lets it
    # through, while the IP literal and [::1] are other hosts
    result = attack(f"""
        echo "localhost=$({PROXIED} http://localhost:$A/)"
        echo "ip=$({PROXIED} http://127.0.0.1:$A/)"
        echo "v6=$({PROXIED} 'http://[::1]:'$A/)"
        echo "tunnel_ip=$({PROXIED} --proxytunnel http://127.0.0.1:$A/)"
        """, allow=["localhost:$A"])
    got = lines(result)
    assert got["localhost"] == "200", result
    assert (got["ip"], got["v6"]) == ("403", "403"), result
    assert got["tunnel_ip"] in ("403", "000"), result
    hosts = sorted(r["subject"]["host"] for r in refused(result))
    assert hosts == ["127.0.0.1", "127.0.0.1", "::1"], result["network"]


def test_127_0_0_1_is_not_localhost_nor_ipv6_loopback(attack: Run) -> None:
    result = attack(f"""
        echo "ip=$({PROXIED} http://127.0.0.1:$A/)"
        echo "localhost=$({PROXIED} http://localhost:$A/)"
        echo "v6=$({PROXIED} 'http://[::1]:'$A/)"
        """)
    got = lines(result)
    assert got == {"ip": "200", "localhost": "403", "v6": "403"}, result
    assert len(refused(result)) == 2
    assert result["hits"]["unlisted"] == 0


def test_the_metadata_address_is_refused_through_the_proxy_and_unreachable_around_it(attack: Run) -> None:
    result = attack(f"""
        echo "metadata=$({CURL} http://169.254.169.254/latest/meta-data/)"
        echo "metadata_name=$({CURL} http://metadata.google.internal/computeMetadata/v1/)"
        echo "direct=$({CURL} -m 3 --noproxy '*' http://169.254.169.254/latest/meta-data/)"
        echo "allowed=$({CURL} http://127.0.0.1:$A/)"
        """)
    got = lines(result)
    assert got == {"metadata": "403", "metadata_name": "403", "direct": "000", "allowed": "200"}, result
    rules = sorted(r["rule"] for r in refused(result))
    assert rules == ["network.special", "network.special"], result["network"]


def test_a_connect_smuggled_after_an_allowed_plain_request_is_judged_and_refused(attack: Run) -> None:
    payload = (
        'b"GET http://127.0.0.1:%d/ HTTP/1.1\\r\\nHost: 127.0.0.1:%d\\r\\n\\r\\n'
        'CONNECT 127.0.0.1:%d HTTP/1.1\\r\\nHost: 127.0.0.1:%d\\r\\n\\r\\nGET / HTTP/1.1\\r\\n\\r\\n" % (A, A, B, B)'
    )
    result = attack(RAW % f'print("smuggled=" + raw("127.0.0.1", 3128, {payload}))')
    got = lines(result)["smuggled"]
    assert got.startswith("HTTP/1.1 200") and "allowed" in got, result
    assert "403 Forbidden" in got, result
    assert result["hits"] == {"allowed": 1, "unlisted": 0, "udp": 0}, result
    (deny,) = refused(result)
    assert deny["subject"]["method"] == "CONNECT" and deny["subject"]["port"] == result["ports"][1]


def test_a_host_header_that_disagrees_with_the_target_is_refused_and_recorded(attack: Run) -> None:
    lying = 'b"GET http://127.0.0.1:%d/ HTTP/1.1\\r\\nHost: 127.0.0.1:%d\\r\\n\\r\\n" % (A, B)'
    origin_form = 'b"GET / HTTP/1.1\\r\\nHost: 127.0.0.1:%d\\r\\n\\r\\n" % B'
    honest = 'b"GET http://127.0.0.1:%d/ HTTP/1.1\\r\\nHost: 127.0.0.1:%d\\r\\n\\r\\n" % (A, A)'
    result = attack(RAW % "\n".join([
        f'print("lying=" + raw("127.0.0.1", 3128, {lying})[:24])',
        f'print("origin_form=" + raw("127.0.0.1", 3128, {origin_form})[:24])',
        f'print("honest=" + raw("127.0.0.1", 3128, {honest})[:15])',
    ]))  # fmt: skip
    got = lines(result)
    assert got["lying"].startswith("HTTP/1.1 400") and got["origin_form"].startswith("HTTP/1.1 400"), result
    assert got["honest"] == "HTTP/1.1 200 OK", result
    assert result["hits"]["unlisted"] == 0 and result["hits"]["allowed"] == 1
    problems = [r["subject"].get("problem", "") for r in refused(result)]
    assert len(problems) == 2 and "disagrees" in problems[0] and "absolute" in problems[1], problems


def test_nothing_inside_resolves_names_or_sends_udp_and_the_proxy_resolves_for_it(attack: Run) -> None:
    result = attack(f"""
        {PY} -c 'import socket
try:
    socket.getaddrinfo("example.com", 80); print("dns=resolved")
except OSError as e:
    print("dns=" + type(e).__name__)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for target in (("8.8.8.8", 53), ("127.0.0.1", int(__import__("os").environ["B"]))):
    try:
        s.sendto(b"x" * 64, target)
        print("udp=sent")
    except OSError as e:
        print("udp=" + type(e).__name__)'
        echo "via_proxy=$({CURL} http://localhost:$A/)"
        """, allow=["localhost:$A"])
    got = result["stdout"]
    assert "dns=gaierror" in got and "dns=resolved" not in got, result
    assert "udp=OSError" in got or "udp=sent" in got  # loopback UDP "sends" into the sandbox's own lo
    assert result["hits"]["udp"] == 0 and result["hits"]["unlisted"] == 0, result
    assert lines(result)["via_proxy"] == "200", result


def test_a_second_connect_inside_an_allowed_tunnel_is_data_for_the_allowed_server(attack: Run) -> None:
    payload = (
        'b"CONNECT 127.0.0.1:%d HTTP/1.1\\r\\nHost: 127.0.0.1:%d\\r\\n\\r\\n'
        'CONNECT 127.0.0.1:%d HTTP/1.1\\r\\nHost: 127.0.0.1:%d\\r\\n\\r\\n" % (A, A, B, B)'
    )
    result = attack(RAW % f'print("tunnel=" + raw("127.0.0.1", 3128, {payload}))')
    got = lines(result)["tunnel"]
    assert got.startswith("HTTP/1.1 200 Connection established"), result
    assert "allowed" in got, result  # the allowed server answered the inner CONNECT
    assert result["hits"] == {"allowed": 1, "unlisted": 0, "udp": 0}, result
    assert [r["verdict"] for r in result["network"]] == ["allow"]


def test_slow_clients_holding_proxy_sockets_are_bounded_and_cut(attack: Run) -> None:
    script = RAW % textwrap.dedent("""
        import time
        held = [socket.create_connection(("127.0.0.1", 3128)) for _ in range(6)]
        time.sleep(0.3)
        extra = raw("127.0.0.1", 3128, b"GET http://127.0.0.1:%d/ HTTP/1.1\\r\\nHost: 127.0.0.1:%d\\r\\n\\r\\n" % (A, A))
        print("while_held=" + extra[:16])
        time.sleep(2.5)
        cut = 0
        for s in held:
            s.settimeout(2)
            try:
                data = s.recv(4096)
                cut += data.startswith(b"HTTP/1.1 408") or data.startswith(b"HTTP/1.1 503") or data == b""
            except OSError:
                cut += 1
        print("cut=%d" % cut)
        after = raw("127.0.0.1", 3128, b"GET http://127.0.0.1:%d/ HTTP/1.1\\r\\nHost: 127.0.0.1:%d\\r\\n\\r\\n" % (A, A))
        print("after=" + after[:15])
    """)
    result = attack(script, limits={"head_timeout": 1.0, "connections": 4})
    got = lines(result)
    assert got["while_held"].startswith("HTTP/1.1 503"), result
    assert got["cut"] == "6", result
    assert got["after"] == "HTTP/1.1 200 OK", result
    timeouts = [r for r in refused(result) if "no complete request head" in r["subject"].get("problem", "")]
    assert len(timeouts) >= 4, result["network"]


def test_a_100_mb_request_header_is_a_clear_431_and_no_memory_growth(attack: Run) -> None:
    script = RAW % textwrap.dedent("""
        import select
        s = socket.create_connection(("127.0.0.1", 3128))
        s.sendall(b"GET http://127.0.0.1:%d/ HTTP/1.1\\r\\nHost: 127.0.0.1:%d\\r\\nX-Big: " % (A, A))
        chunk, sent, answer = b"a" * 65536, 0, b""
        while sent < 100 * 2**20:
            readable, writable, _ = select.select([s], [s], [], 5)
            if readable:
                answer = s.recv(65536)
                break
            try:
                sent += s.send(chunk)
            except OSError:
                break
        if not answer:
            s.settimeout(5)
            try:
                answer = s.recv(65536)
            except OSError as e:
                answer = repr(e).encode()
        print("answer=" + answer.decode(errors="replace").splitlines()[0])
        print("body=" + answer.decode(errors="replace").split("\\r\\n\\r\\n", 1)[-1].strip())
        print("sent_mb=%d" % (sent // 2**20))
    """)
    result = attack(script)
    got = lines(result)
    assert got["answer"] == "HTTP/1.1 431 Request Header Fields Too Large", result
    assert "over 65536 bytes" in got["body"], result
    assert int(got["sent_mb"]) < 100, result
    assert result["peak_rss_kb"] < 150 * 1024, result  # the driver's whole process
    assert result["hits"]["allowed"] == 0
    (deny,) = refused(result)
    assert "over 65536 bytes" in deny["subject"]["problem"]
