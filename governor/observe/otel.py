"""OpenTelemetry for governed attempts: a trace per attempt, metrics for its tally.

The only module that imports ``opentelemetry`` (the optional extra
``acp-governor[otel]``: the official SDK and its OTLP/HTTP exporter). Without the
extra it still imports; `Telemetry` then raises `OtelMissing`, which names the
install line.

What an attempt exports (`AttemptTrace`, an ``on_event`` listener fed the
attempt's masked events, plus its start and its outcome):

- a span ``invoke_agent {agent}`` for the attempt (GenAI semantic conventions:
  ``gen_ai.operation.name``, ``gen_ai.agent.name``, ``gen_ai.conversation.id``
  (the ACP session), ``gen_ai.request.model``, ``gen_ai.usage.*``; ours under
  ``acp_governor.*``: the attempt id, status, reason, tally, the log's path
  and its head: ``acp_governor.audit.head``, ``.records``, ``.key`` when signed);
- a child span ``execute_tool {kind}`` per tool call, opened at its first mention
  (its ``tool_call`` update, or a decision whose subject names it) and ended at
  its ``completed``/``failed`` update or at the attempt's end
  (``gen_ai.tool.name`` (the ACP tool kind), ``gen_ai.tool.call.id``,
  ``gen_ai.tool.type``; ``acp_governor.tool.title``, ``acp_governor.tool.status``);
- a child span per governed MCP request (a decision record of kind ``mcp``),
  named as the MCP semantic conventions name it (``tools/call {tool}``,
  ``prompts/get {prompt}``, ``resources/read``, or the method a server asked
  for): ``mcp.method.name``, ``gen_ai.tool.name`` / ``gen_ai.prompt.name`` /
  ``mcp.resource.uri``, ``acp_governor.mcp.server``, ``acp_governor.verdict``,
  ``acp_governor.by``, ``acp_governor.rule``; opened at its decision, ended
  there when refused (status error), else at the relay's ``mcp_result`` event
  (the server's answer; error when it answered an error) or the attempt's end.
  Never its arguments;
- a child span ``chat {model}`` per model call the proxy saw on the wire (a
  ``model_call`` event): ``gen_ai.operation.name`` ``chat``,
  ``gen_ai.request.model``/``gen_ai.response.model``, ``gen_ai.usage.input_tokens``,
  ``gen_ai.usage.output_tokens`` (and the cache ones), ``gen_ai.response.finish_reasons``,
  ``server.address``/``server.port``, ``http.response.status_code``: the tokens
  the governor read, not the agent's report;
- a span event ``acp_governor.decision`` per decision record of the audit log,
  on its tool call's (or MCP request's) span when its subject names one, else
  on the attempt's:
  ``acp_governor.{seq,kind,verdict,by,rule,reason,hash}``, the record's own;
  and ``acp_governor.waiting`` on the attempt's span when a request waits for a
  person (``acp_governor.kind``, ``acp_governor.reason``);
- counters: ``acp_governor.attempts`` (by status), ``acp_governor.requests``
  (the tally's allowed / waited / refused, by verdict: allowed and refused add
  up to asked less those still pending; waited overlaps them, a request that
  waited for a person is also allowed or refused),
  ``acp_governor.unasked`` (the tally's reported and unasked, by kind),
  ``acp_governor.decisions`` (each decision record as it is written, by kind and
  verdict) and ``acp_governor.mcp.requests`` (each ``mcp`` decision, by server,
  method and verdict).

Hazards this design avoids:

- **A secret in an attribute.** Every value comes from an audit record or an
  event the attempt masked already (`governor.boundary.secrets.Masker.listener`), or is masked
  here (the outcome's reason). No message text, plan or tool input is exported.
- **An unreachable collector slowing the attempt.** Spans go through a batch
  processor and metrics through a periodic reader, both exporting on their own
  threads; each request is bounded by the exporter's timeout
  (``OTEL_EXPORTER_OTLP_TIMEOUT``, 10 s by default), and `Telemetry.shutdown`
  waits at most `FLUSH_TIMEOUT` for what is left, whatever the collector does
  (and no longer once an export has failed).
- **Context leaking across trio tasks.** Nothing is made the current span (a
  context variable would follow whichever task touched it last): tool spans are
  parented on the attempt's span explicitly.
- **Memory growing with the attempt.** At most `OPEN_TOOL_SPANS` tool spans
  (and as many MCP request spans) are open (the oldest is ended beyond that, as `governor.gate.tool_calls` forgets); the
  events of a span are bounded by the SDK's limit (128, or
  ``OTEL_SPAN_EVENT_COUNT_LIMIT``): beyond it a span counts the events it
  dropped, and ``acp_governor.decisions`` still counts every decision.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, replace
from typing import Any, Final

from governor.boundary.secrets import Masker
from governor.ending.outcome import Outcome
from governor.job.spec import AttemptSpec, RefusedBeforeStart

try:  # the optional extra
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import OTELResourceDetector, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.trace import Span, SpanKind, Status, StatusCode
except ImportError as e:  # pragma: no cover - exercised where the extra is missing
    _MISSING: ImportError | None = e
else:
    _MISSING = None

INSTALL: Final = "pip install 'acp-governor[otel]'"
ENDPOINT: Final = "OTEL_EXPORTER_OTLP_ENDPOINT"
FLUSH_TIMEOUT: Final = 2.0
"""Seconds the end of a run waits for the spans and metrics still to be sent."""
OPEN_TOOL_SPANS: Final = 2048
SCOPE: Final = "acp-governor"

_DECISION_FIELDS: Final = ("seq", "kind", "verdict", "by", "rule", "reason", "failed", "hash")
_TOOL_ENDS: Final = frozenset({"completed", "failed"})
_REQUESTS: Final = ("allowed", "waited", "refused", "failed")
_MCP_SUBJECTS: Final = {
    "tools/call": "gen_ai.tool.name",
    "prompts/get": "gen_ai.prompt.name",
    "resources/read": "mcp.resource.uri",
}
"""The MCP semantic conventions' attribute for each governed method's subject."""
_UNASKED: Final = ("reported", "unasked")
_USAGE: Final = {
    "inputTokens": "gen_ai.usage.input_tokens",
    "outputTokens": "gen_ai.usage.output_tokens",
}

Listener = Callable[[str, dict[str, Any]], None]


class OtelMissing(Exception):
    """OpenTelemetry was asked for and the extra is not installed."""


def wanted(flag: bool, environ: Mapping[str, str] | None = None) -> bool:
    """Whether to export: ``--otel``, or an OTLP endpoint in the environment
    (unless ``OTEL_SDK_DISABLED`` is true)."""
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return flag or bool(env.get(ENDPOINT))


def available() -> bool:
    """Whether the extra is installed."""
    return _MISSING is None


class Telemetry:
    """The providers and exporters for the attempts of one run.

    By default spans and metrics go over OTLP/HTTP where the ``OTEL_EXPORTER_OTLP_*``
    variables say (``http://localhost:4318`` when none is set); a test or a host
    application may pass its own span exporter and metric reader. Nothing is
    installed globally: the host's own tracer provider, if any, is left alone.
    """

    def __init__(
        self,
        *,
        span_exporter: Any = None,
        metric_reader: Any = None,
        quiet: bool = False,
    ) -> None:
        if _MISSING is not None:
            raise OtelMissing(
                f"OpenTelemetry export needs the otel extra, which is not installed: {INSTALL}"
            )
        from governor.version import __version__

        resource = Resource.create({"service.name": SCOPE, "service.version": __version__}).merge(
            OTELResourceDetector().detect()
        )  # the operator's OTEL_SERVICE_NAME wins
        self.tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)
        self.tracer_provider.add_span_processor(
            BatchSpanProcessor(span_exporter or OTLPSpanExporter())
        )
        reader: MetricReader = metric_reader or PeriodicExportingMetricReader(OTLPMetricExporter())
        self.meter_provider = MeterProvider(
            resource=resource, metric_readers=[reader], shutdown_on_exit=False
        )
        self.tracer = self.tracer_provider.get_tracer(SCOPE, __version__)
        meter = self.meter_provider.get_meter(SCOPE, __version__)
        self.attempts = meter.create_counter(
            "acp_governor.attempts", unit="{attempt}", description="Attempts ended, by status"
        )
        self.requests = meter.create_counter(
            "acp_governor.requests",
            unit="{request}",
            description="The tally's requests, by verdict (allowed, waited, refused, failed)",
        )
        self.unasked = meter.create_counter(
            "acp_governor.unasked",
            unit="{action}",
            description="The tally's actions the agent took without asking (reported, unasked)",
        )
        self.decisions = meter.create_counter(
            "acp_governor.decisions",
            unit="{decision}",
            description="Decision records of the audit log, by kind and verdict",
        )
        self.mcp_requests = meter.create_counter(
            "acp_governor.mcp.requests",
            unit="{request}",
            description="Governed MCP requests decided, by server, method and verdict",
        )
        self.failures = _Failures()
        self._quiet = quiet
        sdk_logs = logging.getLogger("opentelemetry")
        sdk_logs.addHandler(self.failures)
        if quiet:  # the SDK's retries and errors as one line at the end, not a page of them
            sdk_logs.propagate = False

    def attempt(self, masker: Masker | None = None) -> AttemptTrace:
        """Open the span of one attempt (before its spec is prepared, so that a
        refusal before start is in the trace too). ``masker`` masks what the trace
        takes from the outcome (default: this process's secret-looking variables)."""
        return AttemptTrace(self, masker or Masker.from_environ(os.environ))

    def shutdown(self, timeout: float = FLUSH_TIMEOUT) -> str | None:
        """Send what is left, waiting at most ``timeout`` seconds in all, and no
        longer once an export of it has failed (the SDK would retry after a backoff
        of a second or more: the collector is down, and a governor that waits for it
        ends late every time); then a notice (or None) saying that exports ran into
        trouble, for the operator."""
        deadline = time.monotonic() + timeout
        before = self.failures.count

        def spans() -> None:
            self.tracer_provider.shutdown()  # the batch processor sends what is left

        def metrics() -> None:
            self.meter_provider.shutdown(timeout_millis=timeout * 1000)

        # Side by side, on daemon threads: an exporter stuck on a silent collector
        # is left behind rather than waited for.
        threads = [threading.Thread(target=f, daemon=True) for f in (spans, metrics)]
        for t in threads:
            t.start()
        while self.failures.count == before and (alive := [t for t in threads if t.is_alive()]):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            alive[0].join(min(left, 0.02))
        if not self._quiet:  # (quiet, it stays: a thread left behind may still log)
            logging.getLogger("opentelemetry").removeHandler(self.failures)
        return self.failures.notice()


class AttemptTrace:
    """One attempt's span, its tool calls' spans and its decisions' events: an
    ``on_event`` listener (give it masked events, as the attempt does) that is
    also told of the attempt's end (`ended`, or `refused`)."""

    def __init__(self, telemetry: Telemetry, masker: Masker) -> None:
        self.telemetry = telemetry
        self.masker = masker
        self.agent: str | None = None
        self.span: Span = telemetry.tracer.start_span(
            "invoke_agent",
            kind=SpanKind.CLIENT,
            attributes={"gen_ai.operation.name": "invoke_agent"},
        )
        self.trace_id = format(self.span.get_span_context().trace_id, "032x")
        """The trace's id as 32 hex digits, for `AttemptSpec.trace_id`."""
        self._context = trace.set_span_in_context(self.span)
        self._tools: OrderedDict[str, Span] = OrderedDict()
        self._done: OrderedDict[str, None] = OrderedDict()
        """Tool calls whose span has ended (the last ones): a later mention is not a
        second span of the same call."""
        self._mcp: OrderedDict[int, Span] = OrderedDict()
        """Allowed MCP requests awaiting their answer, by the gate's request number."""
        self._ended = False

    def traced(self, spec: AttemptSpec) -> AttemptSpec:
        """``spec`` with this trace's id, and this listener after its own."""
        own = spec.on_event
        listener: Listener = self if own is None else _chain(own, self)
        return replace(spec, trace_id=self.trace_id, on_event=listener)

    # -- the events of the attempt ------------------------------------------------------

    def __call__(self, kind: str, info: dict[str, Any]) -> None:
        if self._ended:
            return
        records = info.get("records")
        if isinstance(records, list):
            for record in records:
                if isinstance(record, dict):
                    self._decision(record)
        elif kind == "attempt":
            self.agent = _text(info.get("agent"))
            if self.agent:
                self.span.update_name(f"invoke_agent {self.agent}")
            self.span.set_attributes(
                _attributes(
                    {
                        "gen_ai.agent.name": self.agent,
                        "acp_governor.attempt.id": info.get("id"),
                        "acp_governor.log": info.get("log"),
                    }
                )
            )
        elif kind == "prompt":
            self.span.set_attributes(_attributes({"gen_ai.conversation.id": info.get("session")}))
        elif kind == "tool_call":
            self._tool_call(info)
        elif kind == "mcp_result":
            self._mcp_result(info)
        elif kind == "model_call":
            self._model_call(info)
        elif kind == "waiting":  # a request waits for a person; its decision follows
            fields = {
                "acp_governor.kind": info.get("kind"),
                "acp_governor.reason": info.get("reason"),
            }
            self.span.add_event("acp_governor.waiting", _attributes(fields))

    def _tool_call(self, info: Mapping[str, Any]) -> None:
        call = _text(info.get("id"))
        span = self._tool(call, info.get("kind")) if call is not None else None
        if call is None or span is None:
            return  # no id, or an update after the call's end
        span.set_attributes(
            _attributes(
                {
                    "acp_governor.tool.title": info.get("title"),
                    "acp_governor.tool.status": info.get("status"),
                }
            )
        )
        status = info.get("status")
        if status in _TOOL_ENDS:
            if status == "failed":
                span.set_status(Status(StatusCode.ERROR, "the tool call failed"))
            span.end()
            del self._tools[call]
            self._done[call] = None
            if len(self._done) > OPEN_TOOL_SPANS:
                self._done.popitem(last=False)

    def _tool(self, call: str, kind: Any) -> Span | None:
        """The open span of tool call ``call``, opened at this first mention; None
        once it has ended."""
        span = self._tools.get(call)
        if span is not None:
            self._tools.move_to_end(call)
            return span
        if call in self._done:
            return None
        name = _text(kind) or "other"
        span = self.telemetry.tracer.start_span(
            f"execute_tool {name}",
            context=self._context,
            kind=SpanKind.INTERNAL,
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": name,
                "gen_ai.tool.call.id": call,
                "gen_ai.tool.type": "function",
            },
        )
        self._tools[call] = span
        if len(self._tools) > OPEN_TOOL_SPANS:
            _, oldest = self._tools.popitem(last=False)
            oldest.end()
        return span

    def _model_call(self, call: Mapping[str, Any]) -> None:
        """A model call the proxy saw on the wire (`governor.gate.model_calls`): a
        child ``chat {model}`` span (the GenAI conventions' client span of an
        inference), its times the call's own, its tokens the ones read off the
        wire; the key, the prompt and the completion are in no record to give."""
        subject = call.get("subject")
        subject = subject if isinstance(subject, dict) else {}
        tokens = call.get("tokens")
        tokens = tokens if isinstance(tokens, dict) else {}
        model = _text(call.get("model"))
        status = call.get("http_status")
        stop = _text(call.get("stop_reason"))
        fields = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": model,
            "gen_ai.response.model": model,
            "gen_ai.usage.input_tokens": tokens.get("input"),
            "gen_ai.usage.output_tokens": tokens.get("output"),
            "gen_ai.usage.cache_read.input_tokens": tokens.get("cache_read"),
            "gen_ai.usage.cache_creation.input_tokens": tokens.get("cache_write"),
            "gen_ai.response.finish_reasons": [stop] if stop else None,
            "server.address": subject.get("host"),
            "server.port": subject.get("port"),
            "http.request.method": subject.get("method"),
            "url.path": subject.get("path"),
            "http.response.status_code": status,
            "acp_governor.model.first_byte_ms": call.get("first_byte_ms"),
        }
        now = time.time_ns()
        took = call.get("duration_ms")
        start = now - round(took * 1e6) if isinstance(took, int | float) and took >= 0 else now
        span = self.telemetry.tracer.start_span(
            f"chat {model}" if model else "chat",
            context=self._context,
            kind=SpanKind.CLIENT,
            attributes=_attributes(fields),
            start_time=start,
        )
        if not (type(status) is int and 200 <= status < 300):
            span.set_attribute("error.type", str(status) if type(status) is int else "no_response")
            span.set_status(Status(StatusCode.ERROR, "the model API did not answer 2xx"))
        span.end(end_time=now)

    def _mcp_request(self, record: Mapping[str, Any]) -> Span:
        """The span of one governed MCP request, opened at its decision (ended at
        once when refused); its subject's arguments are left out."""
        subject = record.get("subject")
        subject = subject if isinstance(subject, dict) else {}
        method = _text(subject.get("method")) or "mcp"
        name = _text(subject.get("name"))
        server = _text(subject.get("server"))
        verdict = record.get("verdict")
        fields = {
            "mcp.method.name": method,
            "acp_governor.mcp.server": server,
            "acp_governor.verdict": verdict,
            "acp_governor.by": record.get("by"),
            "acp_governor.rule": record.get("rule"),
        }
        if method in _MCP_SUBJECTS:
            fields[_MCP_SUBJECTS[method]] = name
        if method == "tools/call":
            fields["gen_ai.operation.name"] = "execute_tool"
        when = record.get("time")
        stamp = round(when * 1e6) * 1000 if isinstance(when, int | float) else None
        shown = f"{method} {name}" if name and method != "resources/read" else method
        span = self.telemetry.tracer.start_span(
            shown,
            context=self._context,
            kind=SpanKind.CLIENT,
            attributes=_attributes(fields),
            start_time=stamp,
        )
        self.telemetry.mcp_requests.add(
            1,
            _attributes(
                {
                    "acp_governor.mcp.server": server,
                    "mcp.method.name": method,
                    "acp_governor.verdict": verdict,
                }
            ),
        )
        return span

    def _mcp_settled(self, span: Span, record: Mapping[str, Any]) -> None:
        """An allowed request's span waits for its answer; any other ends here."""
        request, verdict = record.get("request"), record.get("verdict")
        if verdict == "allow" and type(request) is int:
            self._mcp[request] = span
            if len(self._mcp) > OPEN_TOOL_SPANS:
                _, oldest = self._mcp.popitem(last=False)
                oldest.end()
            return
        span.set_attribute("error.type", "refused" if verdict == "deny" else str(verdict))
        span.set_status(Status(StatusCode.ERROR, _text(record.get("reason")) or "refused"))
        when = record.get("time")
        span.end(end_time=round(when * 1e6) * 1000 if isinstance(when, int | float) else None)

    def _mcp_result(self, info: Mapping[str, Any]) -> None:
        request = info.get("request")
        span = self._mcp.pop(request, None) if type(request) is int else None
        if span is None:
            return
        if info.get("error"):
            span.set_attribute("error.type", "tool_error")
            span.set_status(Status(StatusCode.ERROR, "the MCP server answered an error"))
        span.end()

    def _decision(self, record: Mapping[str, Any]) -> None:
        subject = record.get("subject")
        call = _text(subject.get("tool_call")) if isinstance(subject, dict) else None
        span = self.span
        if record.get("kind") == "mcp":
            span = self._mcp_request(record)
        elif call is not None:
            kind = subject.get("tool_kind") if isinstance(subject, dict) else None
            span = self._tool(call, kind) or self.span  # (a call ended: on the attempt's)
        attributes = _attributes({f"acp_governor.{k}": record.get(k) for k in _DECISION_FIELDS})
        when = record.get("time")
        stamp = round(when * 1e6) * 1000 if isinstance(when, int | float) else None  # µs, as logged
        span.add_event("acp_governor.decision", attributes, timestamp=stamp)
        if record.get("kind") == "mcp":
            self._mcp_settled(span, record)
        self.telemetry.decisions.add(
            1,
            _attributes(
                {
                    "acp_governor.kind": record.get("kind"),
                    "acp_governor.verdict": record.get("verdict"),
                }
            ),
        )

    # -- the end ----------------------------------------------------------------------------

    def ended(self, outcome: Outcome) -> None:
        """The attempt's outcome: the tally and status on its span, its tool spans
        still open ended, its span ended, the counters counted."""
        if self._ended:
            return
        acp = outcome.acp
        agent = self.masker.text(acp.agent) if acp is not None else self.agent
        reason = self.masker.text(outcome.reason) if outcome.reason else None
        fields: dict[str, Any] = {
            "gen_ai.agent.name": agent,
            "acp_governor.preset": acp.preset if acp is not None else None,
            "gen_ai.request.model": self.masker.text(acp.model) if acp and acp.model else None,
            "acp_governor.status": outcome.status,
            "acp_governor.reason": reason,
            "acp_governor.duration_s": outcome.duration_s,
            # the log's head, kept by the collector apart from the log
            "acp_governor.audit.head": outcome.log_head,
            "acp_governor.audit.records": outcome.log_records,
            "acp_governor.audit.key": outcome.log_key,
        }
        tally = asdict(acp.tally) if acp is not None else {}
        fields.update({f"acp_governor.tally.{k}": v for k, v in tally.items()})
        usage = outcome.usage or {}
        fields.update({name: usage.get(key) for key, name in _USAGE.items()})
        attributes = _attributes(fields)
        if agent:
            self.span.update_name(f"invoke_agent {agent}")
        self.span.set_attributes(attributes)
        if outcome.status == "failed":
            self.span.set_attribute("error.type", "failed")
            self.span.set_status(Status(StatusCode.ERROR, reason))
        by = _attributes({"gen_ai.agent.name": agent, "acp_governor.status": outcome.status})
        self.telemetry.attempts.add(1, by)
        for verdict in _REQUESTS:
            if tally.get(verdict):
                self.telemetry.requests.add(tally[verdict], {**by, "acp_governor.verdict": verdict})
        for kind in _UNASKED:
            if tally.get(kind):
                self.telemetry.unasked.add(tally[kind], {**by, "acp_governor.kind": kind})
        self._end()

    def refused(self, problems: Sequence[str]) -> None:
        """The attempt was refused before start: its span says so and ends."""
        if self._ended:
            return
        first = self.masker.text(problems[0]) if problems else "refused before start"
        self.span.set_attributes(
            {"acp_governor.status": "refused", "error.type": "refused_before_start"}
        )
        self.span.set_status(Status(StatusCode.ERROR, first))
        self.telemetry.attempts.add(1, {"acp_governor.status": "refused"})
        self._end()

    def _end(self) -> None:
        self._ended = True
        for span in (*self._tools.values(), *self._mcp.values()):
            span.end()
        self._tools.clear()
        self._mcp.clear()
        self.span.end()


class _Failures(logging.Handler):
    """Counts the SDK's warnings and errors (a retry, a failed export, a full
    queue), keeping the first, for one notice at the end instead of a page of them."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0
        self.first: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1
        if self.first is None:
            self.first = record.getMessage().splitlines()[0][:300]

    def notice(self) -> str | None:
        """One line for the operator, or None when the export went through."""
        if not self.count:
            return None
        what = "a problem" if self.count == 1 else f"{self.count} problems"
        return (
            f"OpenTelemetry export: {what} (the first: {self.first}); "
            "what was not sent by the end is dropped; the attempt was not affected"
        )


def _chain(first: Listener, second: Listener) -> Listener:
    def both(kind: str, info: dict[str, Any]) -> None:
        first(kind, info)
        second(kind, info)

    return both


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _attributes(
    fields: Mapping[str, Any],
) -> dict[str, str | bool | int | float | list[str]]:
    """The fields that make attribute values (None and other shapes left out;
    a list only of strings, as ``gen_ai.response.finish_reasons``)."""
    return {
        k: v
        for k, v in fields.items()
        if isinstance(v, str | bool | int | float)
        or (isinstance(v, list) and all(isinstance(x, str) for x in v))
    }


__all__ = [
    "ENDPOINT",
    "FLUSH_TIMEOUT",
    "INSTALL",
    "AttemptTrace",
    "OtelMissing",
    "Telemetry",
    "available",
    "for_run",
    "wanted",
]


def for_run(
    flag: bool, masker: Masker, environ: Mapping[str, str] | None = None
) -> AttemptTrace | None:
    """`governor run`'s trace: None when nobody asked for one; refused before start
    when ``--otel`` asks and the extra is missing; a warning and no trace when only
    the environment asks (a variable meant for other tools must not stop a job).
    A setting the SDK refuses (``OTEL_METRIC_EXPORT_INTERVAL=-5``) is treated the same way."""
    if not wanted(flag, environ):
        return None
    try:
        return Telemetry(quiet=True).attempt(masker)
    except (OtelMissing, ValueError, TypeError) as e:
        problem = str(e) if isinstance(e, OtelMissing) else f"OpenTelemetry cannot start: {e}"
        problem = " ".join(masker.text(problem).split()).rstrip(".")
        if flag:
            raise RefusedBeforeStart([f"--otel: {problem}"]) from None
        print(f"governor: {ENDPOINT} is set, but {problem}; no trace is sent", file=sys.stderr)
        return None
