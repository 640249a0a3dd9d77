"""Operational logs (not the audit): structlog events, console in a terminal, JSON otherwise."""

from __future__ import annotations

import logging
import sys

import structlog

from governor.boundary.display import terminal


def _terminal_safe(_: object, __: str, event: dict[str, object]) -> dict[str, object]:
    """Every string in a console line terminal-safe: events carry agent text (a
    malformed line's prefix, a method name), and a terminal would act on it."""
    return {k: terminal(v) if isinstance(v, str) else v for k, v in event.items()}


def configure(*, json_lines: bool | None = None, level: int = logging.WARNING) -> None:
    """Route structlog to stderr: a console renderer in a terminal, JSON lines elsewhere."""
    if json_lines is None:
        json_lines = not sys.stderr.isatty()
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer()
        if json_lines
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            *(() if json_lines else (_terminal_safe,)),  # JSON lines escape controls already
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
