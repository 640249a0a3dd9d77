"""The checks' unittest reporter: standard library only, never imported by the
governor. `governor.checks.check_runs` copies this file, as ``sitecustomize.py``, into a
folder outside every root that it puts first on a check's ``PYTHONPATH``:
every interpreter the check starts imports it at start, and when (only when)
that interpreter imports ``unittest.runner``, its ``TextTestRunner.run`` is
wrapped to write what each test came to as JUnit XML into
the check's report folder, ``reports`` beside this file's folder (a
``.started`` file first, so that a run that never ends, ``os._exit(0)``
inside a test, is told from one that never began). The folder is found from
where this file is, not from a variable: nothing in a check's environment
names a check (`governor.checks.check_runs`), so code under test has no such word to
key on.

Why in every interpreter and not by rewriting the check's command line: a
check's unittest may be started by ``make``, a script or ``setup.py``, not
only by ``python -m unittest``; each is reported the same way.

The system's own ``sitecustomize`` (the next one on ``sys.path``) still runs.
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import importlib.util
import itertools
import os
import sys
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
_REPORTS = os.path.join(os.path.dirname(_HERE), "reports")
_COUNT = itertools.count(1)


def _chain() -> None:
    """Run the sitecustomize this one hides, if any."""
    path = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    with contextlib.suppress(Exception):
        spec.loader.exec_module(module)


class _Recorder:
    """Each test's outcome, as the runner's result object is told it."""

    def __init__(self) -> None:
        self.cases: dict[str, list[Any]] = {}
        self.order: list[str] = []

    def note(self, test: Any, outcome: str, detail: str = "") -> None:
        ident = str(test.id()) if hasattr(test, "id") else str(test)
        if ident not in self.cases:
            self.order.append(ident)
            self.cases[ident] = [outcome, detail]
            return
        was = self.cases[ident][0]
        rank = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}
        if rank.get(outcome, 3) > rank.get(was, 3):
            self.cases[ident] = [outcome, detail]

    def attach(self, result: Any) -> None:
        def wrap(name: str, outcome: str, with_err: bool) -> None:
            original = getattr(result, name, None)
            if original is None:
                return

            def recorded(test: Any, *args: Any) -> Any:
                detail = ""
                if with_err and args:
                    err = args[0]
                    detail = str(err if isinstance(err, str) else err[1])[:500]
                self.note(test, outcome, detail)
                return original(test, *args)

            setattr(result, name, recorded)

        wrap("addSuccess", "passed", False)
        wrap("addFailure", "failed", True)
        wrap("addError", "error", True)
        wrap("addSkip", "skipped", True)
        wrap("addExpectedFailure", "skipped", False)
        wrap("addUnexpectedSuccess", "failed", False)
        sub = getattr(result, "addSubTest", None)
        if sub is not None:

            def subtest(test: Any, subtest_: Any, err: Any) -> Any:
                if err is not None:
                    failed = issubclass(err[0], test.failureException)
                    self.note(test, "failed" if failed else "error", str(err[1])[:500])
                return sub(test, subtest_, err)

            result.addSubTest = subtest

    def write(self, path: str) -> None:
        from xml.etree import ElementTree as ET

        suite = ET.Element("testsuite", name="unittest", tests=str(len(self.order)))
        for ident in self.order:
            outcome, detail = self.cases[ident]
            classname, _, name = ident.rpartition(".")
            case = ET.SubElement(suite, "testcase", classname=classname, name=name)
            if outcome in ("failed", "error", "skipped"):
                tag = {"failed": "failure", "error": "error", "skipped": "skipped"}[outcome]
                ET.SubElement(case, tag, message=detail)
        tmp = path + ".part"
        ET.ElementTree(suite).write(tmp, encoding="utf-8", xml_declaration=True)
        os.replace(tmp, path)


def _patch(runner: Any) -> None:
    original = runner.TextTestRunner.run

    def run(self: Any, test: Any) -> Any:
        recorder = _Recorder()
        make = self._makeResult

        def made() -> Any:
            result = make()
            recorder.attach(result)
            return result

        self._makeResult = made
        base = os.path.join(_REPORTS, f"unittest-{os.getpid()}-{next(_COUNT)}")
        with open(base + ".started", "w", encoding="utf-8"):
            pass
        outcome = original(self, test)
        recorder.write(base + ".xml")
        return outcome

    runner.TextTestRunner.run = run


class _Hook:
    """Patches ``unittest.runner`` as it is imported, and only then."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "unittest.runner":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        loader: Any = spec.loader
        execute = loader.exec_module

        def exec_module(module: Any) -> None:
            execute(module)
            _patch(module)

        loader.exec_module = exec_module
        return spec


_chain()
if _REPORTS and os.path.isdir(_REPORTS):
    sys.meta_path.insert(0, _Hook())
