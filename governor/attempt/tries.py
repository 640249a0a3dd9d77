"""Tries: a job's attempt again, in a fresh copy of its starting workspace, while
its checks fail -- each new try told the failed checks' digest.

A loop gets the three steps a try is made of as public functions, so that a
loop which owns its retries needs none of the command line:

- **attempt**: `governor.run_attempt` (the spec's checks run at its end);
- **checks**: `governor.checks.check_runs.run_checks` (again, or other commands, on the
  workspace the attempt left);
- **digest**: `digest` (the failed checks, bounded and masked) and
  `with_digest` (the prompt of the next try).

`run_tries` is those steps in a loop, as ``governor run --tries N`` and a batch
job's ``tries`` run them. Rules of this file:

- **Every try starts from the same workspace.** Before the first try (and only
  when a second one may follow) the workspace is copied once into a folder no
  sandbox shows (`StartingCopy`: a folder of its own under the governor's folder
  for attempts, or a batch job's own folder there); before each later try the workspace is emptied and the
  copy put back, so a try never builds on what a failed one left. The cost is
  one copy of the workspace, and one copy back per retry: a workspace of
  gigabytes (a checked-in ``node_modules``, a build's output) costs that much
  disk and time, which is why one try copies nothing. Only the workspace is
  reset: a job's extra folders are the job's to reset.
- **Tries go on only while the checks fail.** A try whose verdict is not
  ``failed`` ends them; so does an agent that says ``BLOCKED:`` or waits for a
  person (a retry would not change its mind), and a stop (Ctrl-C).
- **The digest never shows a held-out test**: a check run over held-out
  tests gives only its command and exit status, the held-out tests not
  passed are counted (`governor.checks.check_runs`, `governor.checks.test_results`).
- **The digest is bounded and masked.** Each failed check gives its command,
  exit status and the newest `DIGEST_TAIL` characters of its output (already
  masked when the attempt ran it; masked again with the caller's masker);
  at most `DIGEST_CHECKS` checks are shown, the rest counted. It reaches the
  agent as JSON in a fenced block, its backticks escaped (``\u0060``), so no
  output of a check can close the block and write the prompt's next section.
- **Each try is an attempt of its own**: its own audit log (``--log FILE``
  gives ``FILE`` to the first and ``FILE.try2`` -- the suffix kept -- to the
  second...), its own outcome; the last try's outcome lists them all in
  ``tries``. A later try's attempt-start record holds ``try``: its number, the
  previous try's run id and log head, and the sha256 of its prompt (the
  digest in it), so the logs link up without the outcome.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tempfile
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any, Final

import trio

from governor.boundary import folders, spelling
from governor.boundary.secrets import Masker
from governor.checks.check_values import CheckRun
from governor.confine.attempt_folders import NoAttemptFolder, attempt_folder
from governor.ending.outcome import Outcome
from governor.job.spec import AttemptSpec, Prepared, RefusedBeforeStart, prepare

MAX_TRIES: Final = 20
"""The most tries a job may ask for: each is a whole attempt."""
DIGEST_TAIL: Final = 1500
"""Characters of a failed check's output (its newest) the next try is shown."""
DIGEST_CHECKS: Final = 8
"""Failed checks shown in a digest; more are counted."""
DIGEST_TESTS: Final = 20
"""Acceptance tests not passed shown in a digest; more are counted."""

ENDS_TRIES: Final = frozenset({"blocked", "needs_approval"})
"""Statuses after which no try follows, whatever the verdict."""


def digest(
    runs: Iterable[CheckRun],
    *,
    masker: Masker | None = None,
    tried: int | None = None,
    tests: dict[str, Any] | None = None,
) -> dict[str, Any] | None:
    """The facts of the failed checks among ``runs`` for the next try, as JSON
    values: each failed check's command, exit status (``timed_out`` or the
    ``error`` that kept it from running, when so) and the newest `DIGEST_TAIL`
    characters of its output, masked; and, from ``tests`` (the outcome's,
    `governor.checks.test_results`), the acceptance tests that did not pass and what
    each came to (a check can exit 0 having run none), the held-out ones only
    counted. None when nothing failed.

    Nothing here can carry a held-out test: with held-out tests in the job
    the digest says only that the checks failed and which (no exit status, no
    test, no count: values the code under test, which can read them, chooses)."""
    mask = masker.text if masker is not None else (lambda s: s)
    failed = [r for r in runs if not r.passed]
    not_passed = list((tests or {}).get("not_passed") or [])
    if not failed and not not_passed and not (tests or {}).get("held_out_not_passed"):
        return None
    if (tests or {}).get("held_out"):
        # The checks ran with the held-out files in place, where the code under
        # test can read them: every value its processes choose (an exit status,
        # which tests fail, how many, a timeout) can carry their contents to the
        # next try. Only that the checks failed, and which (the job's words);
        # the agent has the visible tests to run itself.
        commands = [mask(r.command) for r in failed[:DIGEST_CHECKS]] or ["the checks"]
        return {
            "verdict": "failed",
            "failed_checks": [{"command": c} for c in commands],
            "held_out": "tests the agent does not see were in place: nothing more is said",
            **({"try": tried} if tried is not None else {}),
        }
    shown = []
    for run in failed[:DIGEST_CHECKS]:
        fact: dict[str, Any] = {"command": mask(run.command), "exit": run.exit}
        if run.timed_out:
            fact["timed_out"] = True
        if run.error is not None:
            fact["error"] = mask(run.error)
        fact["output_tail"] = mask(run.tail[-DIGEST_TAIL:])
        shown.append(fact)
    out: dict[str, Any] = {"verdict": "failed", "failed_checks": shown}
    if len(failed) > DIGEST_CHECKS:
        out["more_failed_checks"] = len(failed) - DIGEST_CHECKS
    held = (tests or {}).get("held_out_not_passed") or 0
    if held:
        out["held_out_tests_not_passed"] = held
    if not_passed:
        out["tests_not_passed"] = [
            {"test": mask(str(t.get("test"))), "outcome": t.get("outcome")}
            for t in not_passed[:DIGEST_TESTS]
        ]
        if len(not_passed) > DIGEST_TESTS:
            out["more_tests_not_passed"] = len(not_passed) - DIGEST_TESTS
    if tried is not None:
        out["try"] = tried
    return out


def with_digest(prompt: str, facts: dict[str, Any] | None) -> str:
    """The prompt of the next try: ``prompt`` and, when there are ``facts``
    (`digest`), what the checks said about the previous try."""
    if not facts:
        return prompt
    # a backtick only ever sits inside a JSON string: escaped, no output can fence
    text = spelling.dumps(facts, indent=2).replace("`", "\\u0060")
    return (
        f"{prompt.rstrip()}\n\n# Previous attempt (failed; its changes were undone)\n\n"
        "The job's checks failed. The verifier's facts:\n\n"
        f"```json\n{text}\n```\n"
    )


class ResetFailed(Exception):
    """The workspace could not be copied or put back; the message names the path."""


class StartingCopy:
    """The starting workspace, copied once before the first try, put back before
    each later one. Made with `keep`; `discard` removes the copy."""

    def __init__(self, workspace: Path, copy: Path) -> None:
        self.workspace = workspace
        self.copy = copy

    @classmethod
    def keep(cls, workspace: str | Path, scratch: str | Path | None = None) -> StartingCopy:
        """Copy ``workspace`` (links kept as links, never followed) into a new
        folder under ``scratch`` (default: a folder of the attempt's own under
        the governor's folder for attempts, `governor.confine.attempt_folders`, which no
        sandbox shows; not ``/tmp``, often memory, for a copy that may be big)."""
        ws = Path(workspace).resolve()
        try:
            if scratch is None:
                folder = attempt_folder("tries-")
            else:
                Path(scratch).mkdir(parents=True, exist_ok=True, mode=0o700)
                folder = Path(tempfile.mkdtemp(prefix="start-", dir=scratch))
        except NoAttemptFolder as e:
            raise ResetFailed(f"the starting workspace cannot be kept: {e}") from None
        except OSError as e:
            raise ResetFailed(
                f"the starting workspace cannot be kept under {scratch}: {e.strerror}"
            ) from None
        kept = cls(ws, folder / "workspace")
        try:
            shutil.copytree(ws, kept.copy, symlinks=True)
        except (OSError, shutil.Error) as e:
            kept.discard()
            raise ResetFailed(f"the workspace {ws} cannot be copied for the tries: {_why(e)}") from None
        return kept

    def restore(self) -> None:
        """Empty the workspace (its folder kept) and put the starting copy back."""
        try:
            os.chmod(self.workspace, stat.S_IRWXU)  # its own mode comes back with the copy
            for entry in os.scandir(self.workspace):
                folders.remove(Path(entry.path))
            shutil.copytree(self.copy, self.workspace, symlinks=True, dirs_exist_ok=True)
        except (OSError, shutil.Error) as e:
            raise ResetFailed(f"the workspace {self.workspace} cannot be reset: {_why(e)}") from None

    def discard(self) -> None:
        """Remove the copy (and its folder)."""
        if self.copy.parent.exists():
            folders.remove(self.copy.parent)


_KINDS: Final = (
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def _what(path: str) -> str | None:
    """What kind of file ``path`` is when it is one a copy cannot hold (a pipe,
    a socket, a device), else None."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return None
    return next((name for test, name in _KINDS if test(mode)), None)


def _why(e: BaseException) -> str:
    """Why a copy failed, naming the file: `shutil.copytree` gathers its files'
    errors into one `shutil.Error` (an OSError with neither a filename nor a
    strerror), whose first is named with what the file is when a copy cannot
    hold its kind."""
    if isinstance(e, shutil.Error) and e.args and isinstance(e.args[0], list) and e.args[0]:
        failed: list[tuple[str, str, str]] = [t for t in e.args[0] if len(t) == 3]
        if failed:
            src, _dst, why = failed[0]
            kind = _what(src)
            first = f"{src} is {kind}, which cannot be copied" if kind else f"{src}: {why}"
            more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
            return first[:500] + more
    if isinstance(e, OSError):
        if e.filename:
            return f"{e.filename}: {e.strerror}"
        return str(e.strerror if e.strerror is not None else e)[:500]
    return str(e)[:500]


def tries_problems(name: str, tries: object) -> list[str]:
    """Why ``tries`` (given as ``name``) is not a number of tries, or nothing."""
    if type(tries) is not int or not 1 <= tries <= MAX_TRIES:
        return [f"{name} {tries!r}: give a whole number from 1 to {MAX_TRIES}"]
    return []


def try_log(log: str | Path | None, n: int) -> Path | None:
    """The audit log of try ``n`` when the job's is ``log``: ``log`` for the
    first, ``NAME.tryN.SUFFIX`` beside it for the later ones (None: each try a
    fresh default log)."""
    if log is None:
        return None
    path = Path(log)
    if n == 1:
        return path
    return path.with_name(f"{path.stem}.try{n}{path.suffix}")


async def run_tries(
    spec: AttemptSpec | Prepared,
    tries: int,
    *,
    stop: trio.Event | None = None,
    scratch: str | Path | None = None,
) -> Outcome:
    """Up to ``tries`` attempts of ``spec`` (see the module's header): the last
    try's outcome, with every try's outcome in ``tries`` when there was more
    than one possible. Raises `RefusedBeforeStart` when the first try could not
    start, or the workspace cannot be copied."""
    if wrong := tries_problems("tries", tries):
        raise RefusedBeforeStart(wrong)
    from governor.attempt.lifecycle import run_attempt

    first = spec if isinstance(spec, Prepared) else prepare(spec)
    if tries == 1:
        return await run_attempt(first, stop=stop)
    base = first.spec
    try:
        start = await trio.to_thread.run_sync(
            StartingCopy.keep, first.policy.workspace, scratch
        )
    except ResetFailed as e:
        raise RefusedBeforeStart([f"{e}; nothing was started"]) from None
    done: list[dict[str, Any]] = []
    try:
        prepared: Prepared = first
        outcome: Outcome | None = None
        for n in range(1, tries + 1):
            _said(base, "try", {"try": n, "of": tries})
            try:
                current = await run_attempt(prepared, stop=stop)
            except RefusedBeforeStart as e:
                if outcome is None:
                    raise
                _notice(outcome, f"no try {n}: {e}")  # the tries so far stand
                break
            outcome = current
            facts = digest(
                outcome.checks_run, masker=first.masker, tried=n, tests=outcome.tests
            )
            entry = {"try": n, **outcome.to_json()}
            if facts is not None:
                entry["digest"] = facts
            done.append(entry)
            last = n == tries or (stop is not None and stop.is_set())
            if last or outcome.verdict != "failed" or outcome.status in ENDS_TRIES:
                break
            prompt = with_digest(base.prompt, facts)
            tried = {
                "n": n + 1,
                "of": tries,
                "after": {"run_id": outcome.run_id, "log_head": outcome.log_head},
                "prompt_sha256": hashlib.sha256(prompt.encode()).hexdigest() if facts else None,
            }
            nxt = replace(base, prompt=prompt, log=try_log(base.log, n + 1), tried=tried)
            try:
                await trio.to_thread.run_sync(start.restore)
                prepared = prepare(nxt)
            except (ResetFailed, RefusedBeforeStart) as e:
                _notice(outcome, f"no try {n + 1}: {e}")  # the tries so far stand
                break
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(start.discard)
    assert outcome is not None
    outcome.tries = done
    return outcome


def _said(spec: AttemptSpec, kind: str, info: dict[str, Any]) -> None:
    if spec.on_event is not None:
        spec.on_event(kind, info)


def _notice(outcome: Outcome, text: str) -> None:
    if outcome.acp is not None:
        outcome.acp.notices.append(text)
    else:
        outcome.reason = f"{outcome.reason}; {text}" if outcome.reason else text
