"""An OTLP/HTTP receiver on loopback for the OpenTelemetry tests: it keeps every
``POST /v1/traces`` and ``/v1/metrics`` body and decodes them with the official
`opentelemetry-proto` messages. Also `needs_otel`: the tests skip without the
extra, except in CI (``CI`` set), where `.ci/run` installs it and a skip would
hide a regression."""

from __future__ import annotations

import gzip
import os
import threading
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from governor.observe import otel


def needs_otel() -> None:
    """Skip the calling test without the extra; in CI, fail instead."""
    if otel.available():
        return
    if os.environ.get("CI"):
        pytest.fail("the otel extra is not installed in CI: .ci/run installs .[dev,otel]")
    pytest.skip("the otel extra is not installed: pip install -e '.[dev,otel]'")


class Receiver:
    """A collector stand-in: ``url`` is the base for OTEL_EXPORTER_OTLP_ENDPOINT.

    ``hang`` makes it accept each request and answer nothing until it is closed
    (a collector that has stopped answering)."""

    def __init__(self, *, hang: bool = False) -> None:
        self.bodies: list[tuple[str, bytes]] = []
        self.hang = hang
        self.closing = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(size)
                encoding = (self.headers.get("Content-Encoding") or "").lower()
                if encoding == "gzip":
                    body = gzip.decompress(body)
                elif encoding == "deflate":
                    body = zlib.decompress(body)
                receiver.bodies.append((self.path, body))
                if receiver.hang:
                    receiver.closing.wait(120)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.closing.set()
        self.server.shutdown()
        self.server.server_close()

    def raw(self) -> bytes:
        """Every body received, as one blob (to look for a planted secret)."""
        return b"".join(body for _, body in self.bodies)

    def spans(self) -> list[Any]:
        """Every span received, decoded (`opentelemetry.proto.trace.v1.Span`)."""
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        out = []
        for path, body in self.bodies:
            if path == "/v1/traces":
                request = ExportTraceServiceRequest.FromString(body)
                for resource in request.resource_spans:
                    for scope in resource.scope_spans:
                        out.extend(scope.spans)
        return out

    def metrics(self) -> dict[str, list[tuple[dict[str, Any], int]]]:
        """Every counter received: name -> [(attributes, value)] of its data points."""
        from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
            ExportMetricsServiceRequest,
        )

        out: dict[str, list[tuple[dict[str, Any], int]]] = {}
        for path, body in self.bodies:
            if path == "/v1/metrics":
                request = ExportMetricsServiceRequest.FromString(body)
                for resource in request.resource_metrics:
                    for scope in resource.scope_metrics:
                        for metric in scope.metrics:
                            points = out.setdefault(metric.name, [])
                            points.extend(
                                (attributes(p.attributes), p.as_int) for p in metric.sum.data_points
                            )
        return out

    def resources(self) -> Iterator[dict[str, Any]]:
        """The resource attributes of each traces request."""
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        for path, body in self.bodies:
            if path == "/v1/traces":
                for resource in ExportTraceServiceRequest.FromString(body).resource_spans:
                    yield attributes(resource.resource.attributes)


def attributes(pairs: Any) -> dict[str, Any]:
    """OTLP key-value pairs as a dict of plain values."""
    out: dict[str, Any] = {}
    for kv in pairs:
        which = kv.value.WhichOneof("value")
        out[kv.key] = getattr(kv.value, which) if which else None
    return out
