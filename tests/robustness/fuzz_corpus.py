"""The fuzz corpus: what a hostile or broken agent sends, and what the governor must answer.

Hypothesis draws *templates* (a message shape with a bad field, an unknown
method, a bad path, ...); a seeded generator expands them into as many wire
lines as wanted, renumbering ids and mutating bytes (truncation, invalid UTF-8,
nesting) so that 100,000 lines cost a second, not a Hypothesis run per line.

What each line must get back is decided here, from the rules the governor
promises and not from its code:

- framing (JSON-RPC 2.0 over newline-delimited UTF-8, see `governor.acp.jsonrpc`):
  not UTF-8 or not JSON -> ``-32700`` with ``id: null``; a JSON value that is
  not an object, a batch, a bad id type, a method that is not a string, or
  neither request nor response -> ``-32600`` with ``id: null``; a notification
  or a response to an id we never sent -> nothing at all;
- routing: a request for a method the client does not offer (a notification
  method sent with an id included) -> ``-32601``;
- params: what ACP's own schema (`acp.schema`, the official package) rejects ->
  ``-32602``;
- the rest reaches the governor's handlers, and the template says what the
  handler answers (unknown session or terminal ``-32002``, a relative or NUL
  path ``-32602``, a path outside the roots ``-32001``, the probe file's text).

Every request id is unique in a corpus, so an answer to an id that expected
none is caught, and id-null errors are checked by count.

Besides the drawn kinds, a corpus holds a few special lines: one line of 100
MiB (over the 32 MiB limit, its id sniffed: ``-32600`` to that id), permission
requests offering 20,000 options (the one ``allow_once`` among them is
chosen), and pairs of requests sharing an id, written together right after a
probe was answered so that both are read at once (the second: ``-32600``).

Lines go out in batches of 100, each ended by a probe read of a known file
that the agent waits for. Besides proving the governor still serves, this
keeps the id-null errors of one batch within the governor's reply queue (256
lines): the reader never waits to write, so a burst of more unanswerable lines
than that, sent without reading, would see some answers dropped by design.
"""

from __future__ import annotations

import copy
import json
import random
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from acp import schema
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

# -- the rules (ACP's agent -> client requests and their params models) -------------

CLIENT_METHODS: Final[dict[str, type[BaseModel]]] = {
    "session/request_permission": schema.RequestPermissionRequest,
    "fs/read_text_file": schema.ReadTextFileRequest,
    "fs/write_text_file": schema.WriteTextFileRequest,
    "terminal/create": schema.CreateTerminalRequest,
    "terminal/output": schema.TerminalOutputRequest,
    "terminal/wait_for_exit": schema.WaitForTerminalExitRequest,
    "terminal/kill": schema.KillTerminalRequest,
    "terminal/release": schema.ReleaseTerminalRequest,
}

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
REFUSED: Final = -32001
NOT_FOUND: Final = -32002

WS: Final = "@WS@"
SESSION: Final = "@S@"
NEST: Final = '"@NEST@"'
PROBE_FILE: Final = "probe.txt"
PROBE_TEXT: Final = "probe: the governor keeps serving ✓\nsecond line\n"
ID_BASE: Final = 10_000_000
"""Our ids start far above the governor's own (0, 1, 2, ...): a response the agent
sends to one of these is a response to an id the governor never sent."""

Expect = tuple[Any, ...]
"""("error", code) | ("null", code) | ("none",) | ("content",) | ("outcome", "cancelled")
| ("outcome", option_id) | ("ok",): what one line must get back."""


def _base_params() -> dict[str, dict[str, Any]]:
    """A valid params object for each client method (placeholders for the workspace
    and the session, filled when the corpus is written)."""
    return {
        "session/request_permission": {
            "sessionId": SESSION,
            "toolCall": {
                "toolCallId": "tc",
                "title": "Read probe.txt",
                "kind": "read",
                "status": "pending",
                "locations": [{"path": f"{WS}/{PROBE_FILE}"}],
            },
            "options": [
                {"optionId": "ok", "name": "Allow", "kind": "allow_once"},
                {"optionId": "no", "name": "Reject", "kind": "reject_once"},
            ],
        },
        "fs/read_text_file": {
            "sessionId": SESSION,
            "path": f"{WS}/{PROBE_FILE}",
            "line": 1,
            "limit": 10,
        },
        "fs/write_text_file": {"sessionId": SESSION, "path": f"{WS}/fuzz-out.txt", "content": "x"},
        "terminal/create": {
            "sessionId": SESSION,
            "command": "true",
            "args": ["a"],
            "cwd": WS,
            "env": [{"name": "A", "value": "b"}],
            "outputByteLimit": 100,
        },
        "terminal/output": {"sessionId": SESSION, "terminalId": "t-1"},
        "terminal/wait_for_exit": {"sessionId": SESSION, "terminalId": "t-1"},
        "terminal/kill": {"sessionId": SESSION, "terminalId": "t-1"},
        "terminal/release": {"sessionId": SESSION, "terminalId": "t-1"},
    }


BASE: Final = _base_params()


def rejected(method: str, params: Any) -> bool:
    """Whether ACP's schema rejects these params for this client method."""
    try:
        CLIENT_METHODS[method].model_validate(params)
    except ValidationError:
        return True
    return False


# -- templates (drawn by hypothesis) -------------------------------------------------


@dataclass(frozen=True)
class Template:
    """One shape of message. `message` is a JSON value (``id`` set later when the
    template is a request), or `raw` a line of bytes; `expect` is what the
    handler answers when the line gets that far; `mutate` spoils the bytes."""

    kind: str
    message: Any = None
    raw: bytes | None = None
    request: bool = False
    expect: Expect = ("none",)
    mutate: str | None = None


json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every key/index path inside a JSON value (the value itself excluded)."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield (*prefix, k)
            yield from _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield (*prefix, i)
            yield from _paths(v, (*prefix, i))


def _set(value: Any, path: tuple[Any, ...], new: Any, *, delete: bool = False) -> None:
    for step in path[:-1]:
        value = value[step]
    if delete:
        del value[path[-1]]
    else:
        value[path[-1]] = new


@st.composite
def wrong_types(draw: st.DrawFn) -> Template:
    """A client method with one field of the wrong type (or missing, or params not
    an object) -- only what ACP's schema rejects."""
    method = draw(st.sampled_from(sorted(CLIENT_METHODS)))
    params: Any = copy.deepcopy(BASE[method])
    how = draw(st.sampled_from(["retype", "retype", "retype", "drop", "params"]))
    if how == "params":
        params = draw(st.one_of(json_scalars, st.lists(json_values, max_size=3)))
    else:
        path = draw(st.sampled_from(list(_paths(params))))
        if how == "drop":
            _set(params, path, None, delete=True)
        else:
            _set(params, path, draw(json_values))
    assume(rejected(method, params))
    return Template("wrong types", {"jsonrpc": "2.0", "method": method, "params": params},
                    request=True, expect=("error", INVALID_PARAMS))


method_names = st.text(
    alphabet=st.characters(codec="utf-8", exclude_characters="\n"), min_size=0, max_size=30
).filter(lambda m: m not in CLIENT_METHODS) | st.sampled_from(
    ["initialize", "session/new", "session/prompt", "session/cancel", "session/update",
     "_vendor/extension", "fs/read_text_file ", "FS/READ_TEXT_FILE", "$/cancel_request"]
)


@st.composite
def unknown_methods(draw: st.DrawFn) -> Template:
    method = draw(method_names)
    params = draw(json_values)
    return Template("unknown method", {"jsonrpc": "2.0", "method": method, "params": params},
                    request=True, expect=("error", METHOD_NOT_FOUND))


@st.composite
def notifications_with_ids(draw: st.DrawFn) -> Template:
    """A notification method sent as a request: it is a request, and no client method."""
    text = draw(st.text(max_size=30))
    body = {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": text}}
    return Template(
        "notification with an id",
        {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": SESSION, "update": body}},
        request=True,
        expect=("error", METHOD_NOT_FOUND),
    )


@st.composite
def unknown_notifications(draw: st.DrawFn) -> Template:
    method = draw(method_names.filter(lambda m: m not in ("session/update", "$/cancel_request")))
    return Template("unknown notification",
                    {"jsonrpc": "2.0", "method": method, "params": draw(json_values)})


@st.composite
def unknown_responses(draw: st.DrawFn) -> Template:
    rid = draw(st.integers(min_value=10**6, max_value=2**62) | st.text(max_size=10) | st.integers(max_value=-1))
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": rid}
    if draw(st.booleans()):
        body["result"] = draw(json_values)
    else:
        body["error"] = draw(
            st.fixed_dictionaries({"code": st.integers(-33000, -32000), "message": st.text(max_size=20)})
            | json_values
        )
    return Template("response to an id never sent", body)


@st.composite
def session_updates(draw: st.DrawFn) -> Template:
    """Updates for a session that does not exist, malformed updates, and harmless ones."""
    which = draw(st.sampled_from(["unknown session", "malformed update", "harmless update"]))
    text = draw(st.text(max_size=40))
    if which == "unknown session":
        session = draw(st.text(max_size=12).filter(lambda s: s != SESSION))
        update: Any = {"sessionUpdate": "agent_message_chunk",
                       "content": {"type": "text", "text": "INJECTED " + text}}
    elif which == "malformed update":
        session = SESSION
        update = draw(
            st.fixed_dictionaries({"sessionUpdate": st.sampled_from(["tool_call", "plan", "usage_update"])},
                                  optional={"entries": json_values, "toolCallId": json_values})
            | json_values
        )
    else:
        session = SESSION
        update = {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": text}}
    return Template(f"session/update, {which}",
                    {"jsonrpc": "2.0", "method": "session/update",
                     "params": {"sessionId": session, "update": update}})


@st.composite
def not_json(draw: st.DrawFn) -> Template:
    text = draw(st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\n\r"), min_size=1, max_size=60))
    raw = text.encode()
    if not raw.strip():
        raw = b"?" + raw
    try:
        json.loads(raw)
    except ValueError:
        return Template("not JSON", raw=raw)
    return Template("not an object", raw=raw)  # "1", "true", '"x"': JSON, but no object


@st.composite
def spoiled(draw: st.DrawFn) -> Template:
    """A valid request, truncated or with invalid UTF-8 bytes (done at expansion)."""
    method = draw(st.sampled_from(sorted(CLIENT_METHODS)))
    how = draw(st.sampled_from(["truncate", "not_utf8"]))
    return Template("truncated" if how == "truncate" else "not UTF-8",
                    {"jsonrpc": "2.0", "method": method, "params": copy.deepcopy(BASE[method])},
                    request=True, mutate=how)


@st.composite
def framing_errors(draw: st.DrawFn) -> Template:
    which = draw(st.sampled_from(["bad id type", "method not a string", "neither", "batch", "not an object"]))
    if which == "bad id type":
        bad = draw(st.booleans() | st.floats(allow_nan=False, allow_infinity=False)
                   | st.lists(json_scalars, max_size=2) | st.dictionaries(st.text(max_size=3), json_scalars, max_size=2))
        if isinstance(bad, float) and bad.is_integer():
            bad += 0.5
        message: Any = {"jsonrpc": "2.0", "id": bad, "method": "fs/read_text_file", "params": {}}
    elif which == "method not a string":
        method = draw(json_values.filter(lambda v: v is not None and not isinstance(v, str)))
        message = {"jsonrpc": "2.0", "id": 1, "method": method}
    elif which == "neither":
        message = draw(st.dictionaries(st.text(max_size=8).filter(lambda k: k not in ("id", "method")),
                                       json_values, max_size=3))
    elif which == "batch":
        message = draw(st.lists(json_values, max_size=4))
    else:
        message = draw(json_scalars)
    return Template(which, message)


@st.composite
def deep(draw: st.DrawFn) -> Template:
    """Nesting: a bare deep array, or one inside a request's params (depth set at expansion)."""
    inside = draw(st.booleans())
    if inside:
        params = {"sessionId": SESSION, "path": "@NEST@"}
        return Template("deeply nested params",
                        {"jsonrpc": "2.0", "method": "fs/read_text_file", "params": params},
                        request=True, expect=("error", INVALID_PARAMS), mutate="nest")
    return Template("deeply nested array", raw=b"@NEST@", mutate="nest")


@st.composite
def bad_paths(draw: st.DrawFn) -> Template:
    """Relative, empty, NUL and ``..`` paths, for reads and writes."""
    write = draw(st.booleans())
    which = draw(st.sampled_from(["relative", "empty", "NUL", "dotdot out", "dotdot in"]))
    name = draw(st.text(alphabet="abcxyz._-", min_size=1, max_size=8))
    if which == "relative":
        path = draw(st.sampled_from([name, f"./{name}", f"../{name}", "~/x", f"{name}/../{PROBE_FILE}"]))
        expect: Expect = ("error", INVALID_PARAMS)
    elif which == "empty":
        path, expect = "", ("error", INVALID_PARAMS)
    elif which == "NUL":
        path, expect = f"{WS}/{name}\u0000.txt", ("error", INVALID_PARAMS)
    elif which == "dotdot out":
        path = draw(st.sampled_from([f"{WS}/../{name}", f"{WS}/../../etc/passwd", f"{WS}/a/../../{name}"]))
        expect = ("error", REFUSED)
    else:
        path = f"{WS}/sub/../{PROBE_FILE}" if not write else f"{WS}/sub/../fuzz-out.txt"
        expect = ("ok",) if write else ("content",)
    if write:
        params = {"sessionId": SESSION, "path": path, "content": "fuzz\n"}
        method = "fs/write_text_file"
    else:
        params = {"sessionId": SESSION, "path": path}
        method = "fs/read_text_file"
    return Template(f"{'write' if write else 'read'} path {which}",
                    {"jsonrpc": "2.0", "method": method, "params": params}, request=True, expect=expect)


@st.composite
def unknown_ids(draw: st.DrawFn) -> Template:
    """Valid requests naming a session or a terminal that does not exist."""
    method = draw(st.sampled_from(sorted(CLIENT_METHODS)))
    params = copy.deepcopy(BASE[method])
    if method.startswith("terminal/") and method != "terminal/create" and draw(st.booleans()):
        params["terminalId"] = draw(st.text(max_size=12))
        kind = "unknown terminal"
    else:
        params["sessionId"] = draw(st.text(max_size=12).filter(lambda s: s != SESSION))
        kind = "unknown session"
    return Template(kind, {"jsonrpc": "2.0", "method": method, "params": params},
                    request=True, expect=("error", NOT_FOUND))


@st.composite
def permissions(draw: st.DrawFn) -> Template:
    """Permission requests with no options, or with an allow-once among rejects."""
    params = copy.deepcopy(BASE["session/request_permission"])
    if draw(st.booleans()):
        params["options"] = []
        return Template("permission with no options",
                        {"jsonrpc": "2.0", "method": "session/request_permission", "params": params},
                        request=True, expect=("outcome", "cancelled"))
    return Template("permission, allowed",
                    {"jsonrpc": "2.0", "method": "session/request_permission", "params": params},
                    request=True, expect=("outcome", "ok"))


@st.composite
def cancel_requests(draw: st.DrawFn) -> Template:
    return Template("$/cancel_request of an unknown id",
                    {"jsonrpc": "2.0", "method": "$/cancel_request",
                     "params": {"requestId": draw(json_values)}})


WEIGHTS: Final = [
    (wrong_types(), 20),
    (unknown_methods(), 8),
    (notifications_with_ids(), 3),
    (unknown_notifications(), 5),
    (unknown_responses(), 6),
    (session_updates(), 12),
    (spoiled(), 18),
    (not_json(), 6),
    (framing_errors(), 10),
    (deep(), 2),
    (bad_paths(), 5),
    (unknown_ids(), 4),
    (permissions(), 2),
    (cancel_requests(), 1),
]


def draw_templates(per_strategy: int = 60, *, seed: int = 0) -> list[tuple[Template, float]]:
    """Hypothesis draws up to `per_strategy` templates of each kind (fewer where the
    kind has fewer shapes); returns (template, weight), a kind's weight shared
    among its templates."""
    out: list[tuple[Template, float]] = []
    for strategy, weight in WEIGHTS:
        drawn: list[Template] = []

        @hypothesis_seed(seed)
        @settings(
            max_examples=per_strategy,
            database=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
            deadline=None,
        )
        @given(strategy)
        def collect(template: Template) -> None:
            drawn.append(template)  # noqa: B023 - called right here, before the loop moves on

        collect()
        out.extend((t, weight / len(drawn)) for t in drawn)
    return out


# -- expansion: templates -> wire lines with expectations ----------------------------


@dataclass
class Corpus:
    """The agent's script (ops) and what every line must get back."""

    ops: list[dict[str, Any]] = field(default_factory=list)
    blobs: list[bytes] = field(default_factory=list)
    expect: dict[Any, list[Expect]] = field(default_factory=dict)
    """Request id -> the answers it must get (two for a duplicated id)."""
    nulls: Counter[int] = field(default_factory=Counter)
    """Error code -> how many ``id: null`` errors must come back."""
    kinds: Counter[str] = field(default_factory=Counter)
    lines: int = 0
    probes: list[Any] = field(default_factory=list)
    many_options: dict[Any, str] = field(default_factory=dict)
    """Request id -> the one allow-once option among 20,000."""


def frame(line: bytes) -> Expect | None:
    """What JSON-RPC framing alone answers to `line`; None when it is a request that
    goes on to routing."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        return ("null", PARSE_ERROR)
    try:
        message = json.loads(text)
    except (ValueError, RecursionError):
        return ("null", PARSE_ERROR) if line.strip() else ("none",)
    if isinstance(message, list) or not isinstance(message, dict):
        return ("null", INVALID_REQUEST)
    method = message.get("method")
    if isinstance(method, str):
        if "id" not in message:
            return ("none",)
        rid = message["id"]
        if rid is None or (isinstance(rid, int | str) and not isinstance(rid, bool)):
            return None
        return ("null", INVALID_REQUEST)
    if method is not None:
        return ("null", INVALID_REQUEST)
    if "id" in message:
        return ("none",)  # a response; ours never reach this range of ids
    return ("null", INVALID_REQUEST)


def route(message: dict[str, Any]) -> Expect | None:
    """What routing and ACP's schema answer to a request; None when a handler answers."""
    method = message["method"]
    if method not in CLIENT_METHODS:
        return ("error", METHOD_NOT_FOUND)
    if rejected(method, message.get("params")):
        return ("error", INVALID_PARAMS)
    return None


def expand(
    templates: list[tuple[Template, float]],
    count: int,
    *,
    workspace: str,
    session: str,
    seed: int = 0,
    probe_every: int = 100,
    big_line: int = 0,
    many_options: int = 0,
    duplicates: int = 0,
) -> Corpus:
    """`count` lines drawn from `templates` by weight, in batches of `probe_every`, each
    batch ended by a probe read the agent waits for; plus `big_line` bytes in one
    over-long request, `many_options` permission requests offering 20,000 options and
    `duplicates` pairs of requests sharing an id."""
    rng = random.Random(seed)
    population = [t for t, _ in templates]
    weights = [w for _, w in templates]
    corpus = Corpus()
    ids = iter(range(ID_BASE, ID_BASE + 10 * count + 10_000))

    def new_id() -> Any:
        n = next(ids)
        return f"s{n}" if n % 7 == 0 else n

    def place(text: str) -> str:
        return text.replace(WS, workspace).replace(SESSION, session)

    cache: dict[int, tuple[bytes, bytes, Expect]] = {}

    def encoded(template: Template) -> tuple[bytes, bytes, Expect]:
        """The template's line around its id, and what it gets back (not mutated)."""
        if template.raw is not None:
            raw = place(template.raw.decode("utf-8", "surrogatepass")).encode()
            return raw, b"", frame(raw) or ("none",)
        message = template.message
        if template.request:
            message = {"id": "@ID@", **message}
        text = place(json.dumps(message, ensure_ascii=False, separators=(",", ":")))
        line = text.encode("utf-8", "surrogatepass")
        if template.request:
            head, tail = line.split(b'"@ID@"', 1)
            expect = frame(head + b"1" + tail)
            if expect is None:
                expect = route(json.loads(head + b"1" + tail)) or template.expect
            return head, tail, expect
        return line, b"", frame(line) or ("none",)

    def line_of(template: Template) -> tuple[bytes, Expect, Any]:
        found = cache.get(id(template))
        if found is None:
            found = cache[id(template)] = encoded(template)
        head, tail, expect = found
        rid = new_id() if template.request else None
        line = head + json.dumps(rid).encode() + tail if template.request else head
        if template.mutate is None:
            return line, expect, rid if expect[0] not in ("none", "null") else None
        if template.mutate == "truncate":
            line = line[: rng.randrange(1, len(line))]
        elif template.mutate == "not_utf8":
            bad = rng.choice([b"\xff", b"\xc3(", b"\x80", b"\xed\xa0\x80", b"\xc0\xaf", b"\xf8\x88\x80\x80\x80"])
            at = rng.randrange(0, len(line) + 1)
            line = line[:at] + bad + line[at:]
        elif template.mutate == "nest":
            depth = rng.choice([3, 40, 20_000])
            nested = b"[" * depth + b"]" * depth
            line = line.replace(b'"@NEST@"', nested).replace(b"@NEST@", nested)
        expect = frame(line) or route(json.loads(line)) or template.expect
        return line, expect, rid if expect[0] not in ("none", "null") else None

    def add(line: bytes, expect: Expect, rid: Any, kind: str, batch: list[bytes]) -> None:
        batch.append(line + b"\n")
        corpus.lines += 1
        corpus.kinds[kind] += 1
        if expect[0] == "null":
            corpus.nulls[expect[1]] += 1
        elif rid is not None:
            corpus.expect.setdefault(rid, []).append(expect)

    def probe(batch: list[bytes]) -> Any:
        rid = new_id()
        message = {"jsonrpc": "2.0", "id": rid, "method": "fs/read_text_file",
                   "params": {"sessionId": session, "path": f"{workspace}/{PROBE_FILE}"}}
        add(json.dumps(message).encode(), ("content",), rid, "probe", batch)
        corpus.probes.append(rid)
        return rid

    def flush(batch: list[bytes], *, wait: bool = True) -> None:
        if wait:
            rid = probe(batch)
        corpus.blobs.append(b"".join(batch))
        corpus.ops.append({"op": "send", "blob": len(corpus.blobs) - 1})
        if wait:
            corpus.ops.append({"op": "await", "id": rid})
        batch.clear()

    specials = ["big"] * (1 if big_line else 0) + ["many"] * many_options + ["dup"] * duplicates
    rng.shuffle(specials)
    batches = max(1, count // (probe_every - 1))
    slots = sorted(rng.sample(range(batches), min(len(specials), batches)))
    at: dict[int, str] = dict(zip(slots, specials, strict=False))
    late = specials[len(slots) :]
    batch: list[bytes] = []
    for template in rng.choices(population, weights, k=count):
        line, expect, rid = line_of(template)
        add(line, expect, rid, template.kind, batch)
        if len(batch) >= probe_every - 1:
            flush(batch)
            special = at.pop(len(corpus.probes) - 1, None)
            if special is not None:
                _special(corpus, special, new_id, session, workspace, big_line, flush, add, rng)
    if batch:
        flush(batch)
    for special in [*at.values(), *late]:
        _special(corpus, special, new_id, session, workspace, big_line, flush, add, rng)
    return corpus


def _special(corpus: Corpus, which: str, new_id: Any, session: str, workspace: str,
             big_line: int, flush: Any, add: Any, rng: random.Random) -> None:
    batch: list[bytes] = []
    if which == "big":
        rid = new_id()
        head = json.dumps({"jsonrpc": "2.0", "id": rid, "method": "fs/write_text_file"})[:-1]
        head += ',"params":{"sessionId":' + json.dumps(session) + ',"path":'
        head += json.dumps(f"{workspace}/huge.txt") + ',"content":"'
        corpus.ops.append({"op": "big", "head": head, "size": big_line, "tail": '"}}'})
        corpus.expect[rid] = [("error", INVALID_REQUEST)]
        corpus.lines += 1
        corpus.kinds["a line of 100 MB"] += 1
        flush(batch)
    elif which == "many":
        rid = new_id()
        kinds = ["reject_once", "reject_always", "allow_always"]
        options = [{"optionId": f"o{i}", "name": f"Option {i}", "kind": kinds[i % 3]} for i in range(20_000)]
        chosen = rng.randrange(20_000)
        options[chosen] = {"optionId": f"yes{chosen}", "name": "Allow", "kind": "allow_once"}
        params = copy.deepcopy(BASE["session/request_permission"])
        params["options"] = options
        text = json.dumps({"jsonrpc": "2.0", "id": rid, "method": "session/request_permission",
                           "params": params}, separators=(",", ":"))
        text = text.replace(WS, workspace).replace(SESSION, session)
        add(text.encode(), ("outcome", f"yes{chosen}"), rid, "permission with 20,000 options", batch)
        corpus.many_options[rid] = f"yes{chosen}"
        flush(batch)
    else:  # two requests with one id, in one small write right after a probe was answered
        # The first must still be in flight when the second is read: a permission
        # the policy asks about waits for the (unattended) approver, which refuses.
        rid = new_id()
        params = copy.deepcopy(BASE["session/request_permission"])
        params["toolCall"] = {"toolCallId": f"dup-{rid}", "title": "Do something", "kind": "other"}
        params["sessionId"] = session
        first = {"jsonrpc": "2.0", "id": rid, "method": "session/request_permission", "params": params}
        second = {"jsonrpc": "2.0", "id": rid, "method": "fs/read_text_file",
                  "params": {"sessionId": session, "path": f"{workspace}/{PROBE_FILE}"}}
        add(json.dumps(first).encode(), ("outcome", "no"), rid, "duplicate id", batch)
        add(json.dumps(second).encode(), ("error", INVALID_REQUEST), rid, "duplicate id", batch)
        flush(batch, wait=False)


def write_script(corpus: Corpus, path: str) -> None:
    """The agent's script: a JSON header line per op, a send's bytes right after it."""
    with open(path, "wb") as f:
        for op in corpus.ops:
            if op["op"] == "send":
                blob = corpus.blobs[op["blob"]]
                f.write(json.dumps({"op": "send", "size": len(blob)}).encode() + b"\n")
                f.write(blob)
            else:
                f.write(json.dumps(op).encode() + b"\n")
        f.write(json.dumps({"op": "end", "answers": sum(len(v) for v in corpus.expect.values())}).encode() + b"\n")


# -- checking what came back ----------------------------------------------------------


@dataclass
class Verdict:
    """What the agent got back, against what it should have."""

    wrong: list[str] = field(default_factory=list)
    by_kind: Counter[str] = field(default_factory=Counter)
    answered: int = 0
    nulls: Counter[int] = field(default_factory=Counter)


def check(corpus: Corpus, received: list[dict[str, Any]]) -> Verdict:
    """Compare the agent's received messages with the corpus's expectations."""
    verdict = Verdict()
    answers: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for message in received:
        if "method" in message:
            continue  # the governor's own requests and notifications
        rid = message.get("id")
        if rid is None:
            code = (message.get("error") or {}).get("code")
            verdict.nulls[code if isinstance(code, int) else 0] += 1
            continue
        answers[json.dumps(rid)].append(message)
    for code in set(corpus.nulls) | set(verdict.nulls):
        if corpus.nulls[code] != verdict.nulls[code]:
            verdict.wrong.append(
                f"id-null errors {code}: expected {corpus.nulls[code]}, got {verdict.nulls[code]}"
            )
    expected_keys = {json.dumps(k): k for k in corpus.expect}
    for key in answers:
        if key not in expected_keys:
            verdict.wrong.append(f"answered {key}, which expected no answer: {answers[key][0]}")
    for key, rid in expected_keys.items():
        want = sorted(map(repr, corpus.expect[rid]))
        got_messages = answers.get(key, [])
        got = sorted(repr(_shape(m, corpus)) for m in got_messages)
        if got != want:
            verdict.wrong.append(f"id {rid!r}: expected {want}, got {got}: {got_messages}"[:600])
        verdict.answered += len(got_messages)
    return verdict


def _shape(message: dict[str, Any], corpus: Corpus) -> Expect:
    """An answer reduced to the form of an expectation."""
    if "error" in message:
        return ("error", (message.get("error") or {}).get("code"))
    result = message.get("result")
    if not isinstance(result, dict):
        return ("bad result", result)
    if "content" in result:
        return ("content",) if result["content"] == PROBE_TEXT else ("wrong content", result["content"])
    if "outcome" in result:
        outcome = result["outcome"] or {}
        if outcome.get("outcome") == "cancelled":
            return ("outcome", "cancelled")
        return ("outcome", outcome.get("optionId"))
    return ("ok",) if result == {} else ("bad result", result)
