"""The frame of the governor's HTML pages (an attempt's, `governor.audit.report`;
a batch's, `governor.audit.batch_page`): the document around a body, its one
style and one script allowed by hash and nothing else (the
Content-Security-Policy), the status badges, and `escape`, the one way a value
reaches a page.

Rules of this file: every value a page shows from a log or an outcome goes
through `escape` (``html.escape``, quotes included; cut at `SHOWN_CHARS` with
its full length said), as text or inside a quoted attribute; nothing from a log
is put in the style, the script, a URL or an unquoted attribute. The style and
the script are constants of this file, so their hashes are the policy's.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
from typing import Any, Final

from governor.boundary.spelling import escaped

SHOWN_CHARS: Final = 1000
"""What is shown of a long value (a title, a command, a reason); the page says
its full length. A log is crafted as easily as written: a 20 MB title would
otherwise make an 80 MB page."""


def document(title: str, body: str, *, script: bool) -> str:
    """A whole page around ``body``: the viewport, the style, the policy that
    allows only that style (and the filters' script, when ``script``)."""
    csp = _CSP if script else _CSP_NO_SCRIPT
    # a name's byte that is not UTF-8 (a lone surrogate) shown as the log spells
    # it, ``\udcff``: the page is UTF-8, and writing it must not fail on one
    title, body = escaped(title), escaped(body)
    tail = f"<script>{_SCRIPT}</script>\n" if script else ""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{escape(csp)}">\n'
        '<meta name="referrer" content="no-referrer">\n'
        f"<title>{escape(title)}</title>\n"
        f"<style>{_STYLE}</style>\n</head>\n<body>\n{body}\n{tail}</body>\n</html>\n"
    )


BADGES: Final = {
    "completed": "good",
    "passed": "good",
    "blocked": "warn",
    "needs_approval": "warn",
    "incomplete": "warn",
    "failed": "bad",
    "refused": "bad",
    "unfinished": "warn",
}
"""A status's or verdict's badge colour; any other word (a crafted log's) is ``other``."""


def badges(status: str, verdict: str | None, *, ids: bool = True) -> str:
    """The status as a badge, and the checks' verdict beside it when they ran
    (``ids``: the page's one status, ``#status`` and ``#verdict``)."""
    status_id, verdict_id = (' id="status"', ' id="verdict"') if ids else ("", "")
    out = f'<span class="badge {BADGES.get(status, "other")}"{status_id}>{escape(status)}</span>'
    if verdict is not None:
        out += (
            f' <span class="badge {BADGES.get(verdict, "other")}"{verdict_id}>'
            f"checks {escape(verdict)}</span>"
        )
    return out


def escape(value: Any, most: int = SHOWN_CHARS) -> str:
    """Any value as escaped text (quotes too, so it may stand in a quoted attribute),
    cut after ``most`` characters with its full length said."""
    if value is None:
        return ""
    text = value if isinstance(value, str) else json_text(value)
    if len(text) > most:
        text = f"{text[:most]}… (cut for display: {len(text):,} characters)"
    return html.escape(text, quote=True)


def json_text(value: Any, indent: int | None = None) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, indent=indent, default=str)


def _sha256(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


_STYLE: Final = """
*, *::before, *::after { box-sizing: border-box; }
html { -webkit-text-size-adjust: 100%; text-size-adjust: 100%; }
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #1b1b1b;
       overflow-wrap: break-word; }
h1, dd, pre, p, li, legend, label { overflow-wrap: anywhere; }
th { overflow-wrap: normal; }
td .what, td .title, td.reason, td.change, td pre { overflow-wrap: anywhere; }
td .what, td .title { display: block; min-width: 14em; } td.reason { min-width: 14em; }
h1 { font-size: 1.3em; } h2 { font-size: 1.1em; margin-top: 1.6em; }
code, pre, td { font-family: ui-monospace, monospace; font-size: 12px; }
dl { display: grid; grid-template-columns: max-content minmax(0, 1fr); gap: 2px 12px;
     padding: 8px; border-left: 4px solid #888; }
dl.good { border-color: #2e7d32; } dl.bad { border-color: #c62828; color: inherit; }
dt { font-weight: 600; } dd { margin: 0; font-family: ui-monospace, monospace; min-width: 0; }
p.good { color: #2e7d32; } p.bad, .bad { color: #c62828; } p.none { color: #777; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 10px; font-size: 0.75em;
         font-family: system-ui, sans-serif; vertical-align: middle; color: #fff;
         background: #607d8b; white-space: nowrap; }
.badge.good { background: #2e7d32; } .badge.bad { background: #c62828; }
.badge.warn { background: #b26a00; }
#words pre { background: #f6f6f6; padding: 6px 8px; border-left: 4px solid #bbb;
             max-height: 24em; overflow-y: auto; }
.scroll { overflow-x: auto; max-width: 100%; content-visibility: auto;
          contain-intrinsic-size: auto 30em; }
table { border-collapse: collapse; width: 100%; }
td.job { white-space: nowrap; } #timeline { min-width: 60em; } .scroll > table { min-width: 40em; }
th, td { border: 1px solid #ddd; padding: 3px 6px; text-align: left; vertical-align: top; }
th { background: #f3f3f3; font-family: system-ui, sans-serif; }
tr.v-deny td { background: #fdecea; } tr.v-reported td { background: #fff8e1; }
tr.v-approval td { background: #e8f0fe; } tr.v-failed td { background: #f3f3f3; }
td .title { color: #555; } details summary { color: #777; cursor: pointer; }
pre { white-space: pre-wrap; margin: 2px 0; }
fieldset { display: inline-block; margin: 0 1em 0.5em 0; min-width: 0; max-width: 100%; }
label { margin-right: 0.8em; display: inline-block; }
.tally { max-width: 36em; }
.t-row { display: grid; grid-template-columns: 5.5em minmax(0, 1fr) max-content;
         gap: 8px; align-items: center; margin: 3px 0; }
.t-label { text-align: right; font-size: 12px; }
.t-count { font-size: 12px; font-family: ui-monospace, monospace; min-width: 2ch; }
.t-bar { display: block; width: 100%; height: 18px; background: #f3f3f3; }
.bar { fill: #607d8b; } .bar.allowed { fill: #2e7d32; } .bar.refused { fill: #c62828; }
.bar.unasked { fill: #ef6c00; }
.item { border-left: 4px solid #bbb; padding: 2px 8px; margin: 8px 0; }
.item.unasked { border-color: #ef6c00; } .item-head { margin: 2px 0; } .item .explained { color: #555; }
pre.diff, pre.tail { background: #f6f6f6; padding: 4px 6px; max-height: 24em; overflow-y: auto;
                     overflow-wrap: anywhere; font-size: 12px; }
pre.diff span { display: block; }
pre.diff .add { color: #1b5e20; background: #e8f5e9; } pre.diff .del { color: #b71c1c; background: #ffebee; }
pre.diff .hunk, pre.diff .file { color: #777; } .exit { white-space: nowrap; } td.count { white-space: nowrap; } .bar.waited { fill: #1565c0; } .bar.reported { fill: #f9a825; }
@media (max-width: 600px) {
  body { margin: 0.6em; }
  dl { grid-template-columns: minmax(0, 1fr); } dt { margin-top: 4px; }
}
"""

_SCRIPT: Final = """
(function () {
  "use strict";
  var rows = Array.prototype.slice.call(document.querySelectorAll("#timeline tbody tr"));
  var boxes = Array.prototype.slice.call(
    document.querySelectorAll("#filters input[type=checkbox]"));
  var count = document.getElementById("shown");
  var groups = ["verdict", "kind"];
  function chosen(group) {
    var on = {};
    boxes.forEach(function (b) { if (b.name === group && b.checked) { on[b.value] = true; } });
    return on;
  }
  function apply() {
    var verdicts = chosen("verdict"), kinds = chosen("kind"), n = 0;
    rows.forEach(function (r) {
      var show = Object.prototype.hasOwnProperty.call(verdicts, r.dataset.verdict) &&
        Object.prototype.hasOwnProperty.call(kinds, r.dataset.kind);
      r.hidden = !show;
      if (show) { n += 1; }
    });
    count.textContent = n + " of " + rows.length + " decisions shown";
    count.dataset.shown = String(n);
  }
  function decoded(text) {
    try { return decodeURIComponent(text); } catch (e) { return text; }
  }
  function fromFragment() {
    var text = location.hash.replace(/^#/, "");
    if (text.indexOf("=") < 0) { return false; }  /* an anchor (#r7), not a filter */
    var given = {};
    text.split("&").forEach(function (pair) {
      var i = pair.indexOf("=");
      if (i > 0) { given[decoded(pair.slice(0, i))] = pair.slice(i + 1).split(",").map(decoded); }
    });
    boxes.forEach(function (b) {
      b.checked = !Object.prototype.hasOwnProperty.call(given, b.name) ||
        given[b.name].indexOf(b.value) >= 0;
    });
    return true;
  }
  function toFragment() {
    var parts = [];
    groups.forEach(function (group) {
      var mine = boxes.filter(function (b) { return b.name === group; });
      var on = mine.filter(function (b) { return b.checked; });
      if (on.length < mine.length) {
        parts.push(group + "=" + on.map(function (b) { return encodeURIComponent(b.value); }).join(","));
      }
    });
    try {
      history.replaceState(null, "", parts.length ? "#" + parts.join("&") : "#all=");
    } catch (e) { /* a page opened where history cannot change: the filter still applies */ }
  }
  boxes.forEach(function (b) {
    b.addEventListener("change", function () { toFragment(); apply(); });
  });
  window.addEventListener("hashchange", function () { if (fromFragment()) { apply(); } });
  fromFragment();
  apply();
})();
"""

_CSP: Final = (
    f"default-src 'none'; style-src '{_sha256(_STYLE)}'; script-src '{_sha256(_SCRIPT)}'; "
    "base-uri 'none'; form-action 'none'"
)
_CSP_NO_SCRIPT: Final = (
    f"default-src 'none'; style-src '{_sha256(_STYLE)}'; script-src 'none'; "
    "base-uri 'none'; form-action 'none'"
)
