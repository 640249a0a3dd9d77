"""The report page's model calls: every call to a model API the proxy saw on
the wire (the ``model`` records, `governor.gate.model_calls`), summed by model
and listed one row each, so an auditor reads the tokens the governor counted
beside what the agent reported (the usage line).

Rules of this file: pure (a page's records in, HTML out); every value escaped
(`governor.audit.html_page.escape`), a record's numbers shown only when they
are numbers (a crafted log's strings are text, never markup or arithmetic);
the table holds the rows `governor.audit.page_source` kept and says how many
more there were.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from governor.audit.html_page import escape
from governor.sandbox.net.model_calls import TOKEN_KINDS as TOKEN_COLUMNS


def _count(value: Any) -> int:
    return value if type(value) is int and value >= 0 else 0


def _tokens(record: Mapping[str, Any]) -> Mapping[str, Any]:
    tokens = record.get("tokens")
    return tokens if isinstance(tokens, Mapping) else {}


def section(records: list[dict[str, Any]], total: int, attempt: str) -> str:
    """The ``#models`` section, or "" when no model call was seen."""
    if not total:
        return ""
    sums: dict[str, list[int]] = {}
    failed = 0
    for r in records:
        said = r.get("model")
        model = said if isinstance(said, str) else "(not said)"
        row = sums.setdefault(model, [0] * (1 + len(TOKEN_COLUMNS)))
        row[0] += 1
        for i, kind in enumerate(TOKEN_COLUMNS, 1):
            row[i] += _count(_tokens(r).get(kind))
        status = r.get("http_status")
        if not (type(status) is int and 200 <= status < 300):
            failed += 1
    heads = "".join(f"<th>{k.replace('_', ' ')}</th>" for k in TOKEN_COLUMNS)
    summed = "".join(
        f"<tr><td><code>{escape(model)}</code></td><td>{row[0]:,}</td>"
        + "".join(f"<td>{n:,}</td>" for n in row[1:])
        + "</tr>"
        for model, row in sorted(sums.items())
    )
    rows = "".join(_row(r) for r in records)
    cut = (
        f'<p class="bad cut" id="models-cut">this page holds the first {len(records):,} of '
        f"{total:,} model calls: <code>{escape(f'governor audit --attempt {attempt} LOG')}</code> "
        "lists every one</p>"
        if len(records) < total
        else ""
    )
    said = f"{total:,} model call(s) seen on the wire" + (
        f", {failed:,} not answered 2xx" if failed else ""
    )
    return (
        f'<section id="models"><h2>Model calls ({total:,})</h2>{cut}'
        f'<p id="models-line">{escape(said, 200)}</p>'
        f'<div class="scroll"><table id="models-by-model"><thead><tr><th>model</th><th>calls</th>{heads}'
        f"</tr></thead><tbody>{summed}</tbody></table></div>"
        '<div class="scroll"><table id="models-calls"><thead><tr><th>#</th><th>call</th><th>model</th>'
        "<th>status</th><th>in</th><th>out</th><th>first byte</th><th>took</th><th>stop</th>"
        f"</tr></thead><tbody>{rows}</tbody></table></div></section>"
    )


def _row(r: Mapping[str, Any]) -> str:
    given = r.get("subject")
    subject: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
    port = subject.get("port")
    where = f"{subject.get('host', '?')}" + (f":{port}" if type(port) is int else "")
    call = f"{subject.get('method', '?')} {where}{subject.get('path', '')}"
    status = r.get("http_status")
    css = "good" if type(status) is int and 200 <= status < 300 else "bad"
    tokens = _tokens(r)

    def ms(key: str) -> str:
        value = r.get(key)
        return f"{value:,.0f} ms" if isinstance(value, int | float) and not isinstance(value, bool) else ""

    seq = r.get("seq")
    anchor = f'<a href="#r{seq}">#{seq}</a>' if type(seq) is int else ""
    unread = " (usage unread)" if r.get("usage_unread") else ""
    return (
        f"<tr><td>{anchor}</td><td><code>{escape(call, 120)}</code></td>"
        f"<td>{escape(r.get('model'))}</td><td class=\"{css}\">{escape(status)}{unread}</td>"
        f"<td>{_count(tokens.get('input')):,}</td><td>{_count(tokens.get('output')):,}</td>"
        f"<td>{ms('first_byte_ms')}</td><td>{ms('duration_ms')}</td>"
        f"<td>{escape(r.get('stop_reason'))}</td></tr>"
    )
