"""A whole attempt behind the proxy: the agent reaches its base URL, nothing else,
its own loopback server past the proxy, and an agent that cannot reach its API
fails naming the host and the flag."""

from __future__ import annotations

import http.server
import os
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "audit"))
from audit_helpers import scripted_spec

from governor import run_attempt
from governor.audit.reading import decision_records


class _Model(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"model says hi"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def model() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Model)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


def environ(port: int) -> dict[str, str]:
    return {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/root"),
            "OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1"}  # fmt: skip


async def test_the_sandboxed_agent_reaches_its_base_url_through_the_proxy_with_no_flag(
    tmp_path: Path, model: int
) -> None:
    steps = [{"fetch": f"http://127.0.0.1:{model}/v1/models"}]
    spec = scripted_spec(tmp_path, steps, sandbox_agent=True, environ=environ(model),
                         env=["OPENAI_BASE_URL"])  # fmt: skip
    outcome = await run_attempt(spec)
    assert outcome.status == "completed", outcome.reason
    (record,) = [
        r for r in decision_records(outcome.log, outcome.run_id) if r.get("kind") == "network"
    ]
    assert record["verdict"] == "allow" and record["subject"]["port"] == model
    # NO_PROXY sends it straight to the loopback address: the forward there is judged
    assert record["subject"]["via"] == "forward"
    assert record["rule"] == f"network.agent: 127.0.0.1:{model}"
    assert outcome.acp is not None and outcome.acp.tally.allowed == 1


OWN_SERVER = (
    "python3 -m http.server 8765 --bind 127.0.0.1 </dev/null >/dev/null 2>&1 & "
    "for i in $(seq 200); do curl -s -o /dev/null http://127.0.0.1:8765/ && break; sleep 0.05; done; "
    "curl -s -m 10 -o /dev/null -w 'own=%{http_code} ' http://localhost:8765/ > {cwd}/codes; "
    "curl -s -m 10 -o /dev/null -w 'unlisted=%{http_code}' http://unlisted.example.test/ >> {cwd}/codes"
)


async def test_an_agent_reaches_its_own_local_server_past_the_proxy_and_nothing_unlisted(
    tmp_path: Path, model: int
) -> None:
    # an agent's own server on loopback (as `opencode acp` has) is inside its sandbox
    steps = [{"shell": OWN_SERVER}, {"fetch": "http://127.0.0.1:8765/"}]
    spec = scripted_spec(tmp_path, steps, sandbox_agent=True, environ=environ(model),
                         env=["OPENAI_BASE_URL"])  # fmt: skip
    outcome = await run_attempt(spec)
    assert outcome.status == "completed", outcome.reason
    assert (tmp_path / "ws" / "codes").read_text() == "own=200 unlisted=403"
    network = [r for r in decision_records(outcome.log, outcome.run_id) if r.get("kind") == "network"]
    assert [(r["subject"]["host"], r["verdict"]) for r in network] == [("unlisted.example.test", "deny")]
    assert outcome.acp is not None and outcome.acp.tally.refused == 1


async def test_an_agent_that_cannot_reach_its_api_fails_naming_the_host_and_the_flag(
    tmp_path: Path, model: int
) -> None:
    steps = [{"fetch": "http://api.example.test/v1/models"}]
    spec = scripted_spec(tmp_path, steps, sandbox_agent=True, environ=environ(model),
                         env=["OPENAI_BASE_URL"])  # fmt: skip
    outcome = await run_attempt(spec)
    assert outcome.status == "failed"
    assert "the proxy refused" in (outcome.reason or "")
    assert "api.example.test:80" in (outcome.reason or "")
    assert "--allow-host api.example.test:80" in (outcome.reason or "")
    (record,) = [
        r for r in decision_records(outcome.log, outcome.run_id) if r.get("kind") == "network"
    ]
    assert record["verdict"] == "deny" and record["rule"] == "network.default"
    assert outcome.acp is not None and outcome.acp.tally.refused == 1


async def test_a_host_allowed_but_not_resolving_is_not_blamed_on_a_missing_flag(
    tmp_path: Path, model: int
) -> None:
    """The operator gave --allow-host for it; no rule refused it; the name does not
    resolve (``.invalid`` never does): the reason says so, and suggests no flag."""
    steps = [{"fetch": "http://api.nosuch.invalid/v1/models"}]
    spec = scripted_spec(tmp_path, steps, sandbox_agent=True, environ=environ(model),
                         env=["OPENAI_BASE_URL"], allow_hosts=["api.nosuch.invalid:80"])  # fmt: skip
    outcome = await run_attempt(spec)
    assert outcome.status == "failed"
    reason = outcome.reason or ""
    assert "could not reach api.nosuch.invalid:80: the host does not resolve" in reason
    assert "no rule refused it" in reason
    assert "--allow-host" not in reason
    (record,) = [
        r for r in decision_records(outcome.log, outcome.run_id) if r.get("kind") == "network"
    ]
    assert record["verdict"] == "deny" and record["rule"] == "network.dns"
    assert record.get("failed") == "dns"
    # no rule refused it: counted as failed, not refused (`--fail-on refused` is the policy's)
    assert outcome.acp is not None
    assert (outcome.acp.tally.failed, outcome.acp.tally.refused) == (1, 0)


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed: a connect is refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


RETRYING = (
    "for i in $(seq 60); do curl -s -m 5 -o /dev/null http://127.0.0.1:{port}/v1/models; "
    "sleep 1; done"
)
"""An agent retrying its model API for a minute, as Claude Code does for minutes."""


async def test_a_model_api_that_refuses_the_connection_ends_the_attempt_at_its_first_failure_as_failed(
    tmp_path: Path,
) -> None:
    port = closed_port()
    steps = [{"shell": RETRYING.format(port=port)}]
    spec = scripted_spec(tmp_path, steps, sandbox_agent=True, environ=environ(port),
                         env=["OPENAI_BASE_URL"], timeout=120)  # fmt: skip
    outcome = await run_attempt(spec)
    assert outcome.status == "failed"
    reason = outcome.reason or ""
    assert f"the model API 127.0.0.1:{port} cannot be reached: the host refused the connection" in reason
    assert "at its first try" in reason and "timed out" not in reason, reason
    network = [r for r in decision_records(outcome.log, outcome.run_id) if r.get("kind") == "network"]
    # the connection was allowed (its base URL), then failed: one request, two records
    allowed, failed = network[0], network[1]
    assert (allowed["verdict"], allowed.get("failed")) == ("allow", None)
    assert (failed["verdict"], failed["failed"], failed["rule"]) == ("deny", "refused", "network.connect")
    assert failed["request"] == allowed["request"]
    assert outcome.acp is not None
    t = outcome.acp.tally
    assert t.refused == 0 and t.failed >= 1 and t.asked == t.allowed + t.failed, t


async def test_a_host_that_refuses_the_connection_and_is_not_the_model_api_fails_one_request_not_the_attempt(
    tmp_path: Path, model: int
) -> None:
    """The neighbour: another allowed host (a port of loopback the job allowed)
    refuses the connection: that request failed, the attempt goes on."""
    port = closed_port()
    steps = [{"fetch": f"http://127.0.0.1:{model}/v1/models"},
             {"shell": f"curl -s -m 5 -o /dev/null http://127.0.0.1:{port}/; echo tried"},
             {"fetch": f"http://127.0.0.1:{model}/v1/models"}]  # fmt: skip
    spec = scripted_spec(tmp_path, steps, sandbox_agent=True, environ=environ(model),
                         env=["OPENAI_BASE_URL"], allow_hosts=[f"127.0.0.1:{port}"])  # fmt: skip
    outcome = await run_attempt(spec)
    assert outcome.status == "completed", outcome.reason
    assert outcome.acp is not None
    t = outcome.acp.tally
    assert (t.allowed, t.failed, t.refused) == (2, 1, 0), t


async def test_a_model_api_that_answered_then_stops_ends_the_attempt_at_the_third_failure_in_a_row(
    tmp_path: Path,
) -> None:
    """Answered once (the server then closes its port): one failure, then a
    second, go on (an API may blink); the third in a row ends the attempt."""
    server = http.server.HTTPServer(("127.0.0.1", 0), _Model)
    port = server.server_address[1]

    def serve_once() -> None:
        server.handle_request()
        server.server_close()  # from now on a connection to it is refused

    threading.Thread(target=serve_once, daemon=True).start()
    steps = [{"fetch": f"http://127.0.0.1:{port}/v1/models"}, {"shell": RETRYING.format(port=port)}]
    spec = scripted_spec(tmp_path, steps, sandbox_agent=True, environ=environ(port),
                         env=["OPENAI_BASE_URL"], timeout=120)  # fmt: skip
    outcome = await run_attempt(spec)
    assert outcome.status == "failed"
    reason = outcome.reason or ""
    assert f"the model API 127.0.0.1:{port} cannot be reached: the host refused the connection" in reason
    assert "3 times in a row" in reason, reason
    network = [r for r in decision_records(outcome.log, outcome.run_id) if r.get("kind") == "network"]
    failed = [r for r in network if r.get("failed") == "refused"]
    assert len(failed) == 3, [(r["verdict"], r.get("failed")) for r in network]
    assert outcome.acp is not None and outcome.acp.tally.refused == 0
