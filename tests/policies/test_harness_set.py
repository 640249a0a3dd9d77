"""The checks' harness set (`governor.policies.harness`): what decides what a check runs,
named by path; the programs a check names; a job widening or narrowing it;
governed writes to it refused when it is frozen; its keys validated."""

from __future__ import annotations

import pytest

from governor.policies.actions import WriteFile
from governor.policies.decide import decide
from governor.policies.errors import ConfigError
from governor.policies.harness import (
    make_recipes,
    member,
    named_programs,
    package_scripts,
    path_assignments,
    path_entries,
    reason,
)
from governor.policies.policy import parse_policy
from governor.policies.rules import Verdict

WS = "/work/app"
LOOP = '[checks]\ncommands = ["python3 -m pytest -q"]\n'


@pytest.mark.parametrize(
    "rel",
    [
        "pytest.ini", ".pytest.ini", "pytest.toml", ".pytest.toml", "pyproject.toml", "tox.ini",
        "setup.cfg", "conftest.py", "tests/conftest.py", "sub/pytest.ini", "package.json", ".npmrc",
        "GNUmakefile", "makefile", "Makefile", "sitecustomize.py",
        "tests/__init__.py", "tests/acceptance/__init__.py", "src/pkg/test/__init__.py",
        "pytest.py", "_pytest/__init__.py", "unittest/__init__.py", "unittest/__main__.py", "json.py",
        "calc.pyc", "calc.cpython-311-x86_64-linux-gnu.so", "calc.abi3.so",
        "evil-1.0.dist-info/entry_points.txt", "evil-1.0.dist-info/METADATA", "entry_points.txt", "x.pth",
    ],
)  # fmt: skip
def test_what_decides_what_a_check_runs_is_in_the_harness_set_wherever_it_is(rel: str) -> None:
    assert reason(rel) is not None


@pytest.mark.parametrize(
    "rel",
    [
        "calc.py", "src/pkg/__init__.py", "tests/test_calc.py", "tests/acceptance/test_x.py",
        "__pycache__/calc.cpython-311.pyc", "tests/__pycache__/test_x.cpython-311-pytest-9.0.pyc",
        ".pytest_cache/v/cache/lastfailed", "test/test_x.py", "html/index.html", "README.md",
        "node_modules/pkg/package.json", ".git/config", ".venv/lib/python3.11/site-packages/x.pth",
        ".venv/lib/python3.11/site-packages/pytest/__init__.py",
    ],
)  # fmt: skip
def test_the_projects_own_code_tests_and_caches_are_not_in_the_harness_set(rel: str) -> None:
    assert reason(rel, frozenset({".venv"})) is None


@pytest.mark.parametrize(
    ("command", "programs"),
    [
        ("python3 -m unittest discover -s tests -t . -q", ("python3",)),
        ("node --test tests/a.mjs tests/acceptance/b.mjs", ("node",)),
        (
            "sh ci/test.sh && .venv/bin/python -m pytest tests",
            ("sh", "ci/test.sh", ".venv/bin/python"),
        ),
        ("CI=1 ./ci/check | tee out.txt; make test", ("./ci/check", "tee", "make")),
        ("env FOO=1 python3 tools/run.py --fast", ("python3", "tools/run.py")),
        ("echo 'unbalanced", ()),
        (". ci/env.sh && source ./ci/more", ("ci/env.sh", "./ci/more")),
        ("sh -e ci/test.sh", ("sh", "ci/test.sh")),
        ("bash -o pipefail -x -- ci/test.sh arg", ("bash", "ci/test.sh")),
        ("sh -ec 'tools/run --fast' name", ("sh",)),
        ("cd ci && ./t.sh && sh x.sh", ("ci/t.sh", "sh", "ci/x.sh")),
        ("node -r ./hook.js --import=./esm.mjs --test t.mjs", ("node", "./hook.js", "./esm.mjs")),
        ("node -e 'x' t.mjs", ("node",)),
        ("python3 -W ignore -X dev tools/run.py", ("python3", "tools/run.py")),
    ],
)
def test_a_checks_programs_are_its_commands_and_the_scripts_they_are_given_not_its_test_files(
    command: str, programs: tuple[str, ...]
) -> None:
    assert named_programs(command) == programs


def test_what_a_shell_reads_as_its_own_lines_is_read_in_turn() -> None:
    """A file ``.``/``source`` reads and a script given to a shell are shell
    lines whatever their name (no ``.sh``, no ``#!``), and a ``-c`` string is a
    line of its own."""
    from governor.policies.harness import reach

    got = reach("sh -x ci/check && . ci/env && bash -c 'tools/lint -q'")
    assert got.programs == ("sh", "ci/check", "ci/env", "bash")
    assert got.shell_scripts == {"ci/check", "ci/env"}
    assert got.lines == ("tools/lint -q",)


def test_a_job_without_checks_has_no_harness_set() -> None:
    p = parse_policy('capability = "edit-workspace"\n', "p.toml").bind(WS)
    assert member(p, f"{WS}/pytest.ini") is None


def test_a_job_widens_and_narrows_its_harness_set_and_the_programs_its_checks_run_are_in_it() -> (
    None
):
    p = parse_policy(
        LOOP + 'harness_add = ["ci/**"]\nharness_except = ["pyproject.toml"]\n', "p.toml"
    ).bind(WS)
    assert member(p, f"{WS}/ci/lib/helpers.sh") == "harness_add: ci/**"
    assert member(p, f"{WS}/pyproject.toml") is None
    assert member(p, f"{WS}/pytest.ini") is not None
    everything = parse_policy(LOOP + 'harness_except = ["**"]\n', "p.toml").bind(WS)
    assert member(everything, f"{WS}/pytest.ini") is None
    from dataclasses import replace

    named = replace(p, harness_named=(f"{WS}/.venv",))
    assert (
        member(named, f"{WS}/.venv/lib/python3.11/site-packages/a.pth")
        == f"run by a check ({WS}/.venv)"
    )


def test_a_governed_write_to_the_harness_set_is_refused_when_frozen_and_allowed_when_audited() -> (
    None
):
    frozen = parse_policy('capability = "edit-workspace"\n' + LOOP, "p.toml").bind(WS)
    refused = decide(WriteFile(f"{WS}/tests/__init__.py"), frozen)
    assert (refused.verdict, refused.rule) == (Verdict.DENY, "harness: frozen")
    assert "test folder" in refused.reason
    assert (
        decide(WriteFile(f"{WS}/calc.py"), frozen).verdict == Verdict.ALLOW
    )  # the allowed neighbour
    audited = parse_policy(
        'capability = "edit-workspace"\n' + LOOP + 'harness = "audited"\n', "p.toml"
    )
    assert decide(WriteFile(f"{WS}/tests/__init__.py"), audited.bind(WS)).verdict == Verdict.ALLOW
    no_checks = parse_policy('capability = "edit-workspace"\n', "p.toml").bind(WS)
    assert decide(WriteFile(f"{WS}/tests/__init__.py"), no_checks).verdict == Verdict.ALLOW


@pytest.mark.parametrize(
    ("text", "culprit"),
    [
        (
            '[checks]\nharness = "off"\n',
            "p.toml: checks.harness: 'off' is not accepted (accepted: frozen, audited)",
        ),
        (
            '[checks]\nharness_add = ["/etc/**"]\n',
            "p.toml: checks.harness_add: '/etc/**' must be relative",
        ),
        ('[checks]\nharness_add = ["**"]\n', "p.toml: checks.harness_add: '**' names a whole root"),
        (
            '[checks]\nharness_except = ["../x"]\n',
            "p.toml: checks.harness_except: '../x' must be relative",
        ),
        (
            '[checks]\nacceptance = "tests/test_x.py"\n',
            "p.toml: checks.acceptance: expected an array",
        ),
        ('[checks]\nacceptance = [""]\n', "p.toml: checks.acceptance: a test must be named"),
    ],
)
def test_a_bad_harness_or_acceptance_key_is_an_error_naming_file_and_key(
    text: str, culprit: str
) -> None:
    with pytest.raises(ConfigError) as e:
        parse_policy(text, "p.toml")
    assert culprit in str(e.value)


def test_make_runs_every_recipe_line_and_reads_what_it_includes() -> None:
    text = (
        "include mk/ci.mk\n-include $(CONFIG)\n\n"
        "test: build\n\t@sh ci/test.sh \\\n\t  --fast\n\t-./tools/lint\n# a comment\n"
        "build:\n\t+$(MAKE) -C sub\n"
    )
    recipes, includes = make_recipes(text)
    assert includes == ["mk/ci.mk"]  # one naming a variable is not the workspace's to read
    assert recipes[0].startswith("sh ci/test.sh")
    assert [named_programs(r)[:2] for r in recipes] == [
        ("sh", "ci/test.sh"),
        ("./tools/lint",),
        ("make",),
    ]


def test_npm_runs_every_script_of_package_json() -> None:
    text = '{"scripts": {"test": "npm run unit", "unit": "sh scripts/unit.sh", "n": 3}}'
    assert package_scripts(text) == ["npm run unit", "sh scripts/unit.sh"]
    assert package_scripts("not json") == [] and package_scripts('{"scripts": []}') == []


def test_a_shell_line_s_search_paths_are_read_and_variables_left_out() -> None:
    line = "PYTHONPATH=$PYTHONPATH:src env NODE_PATH=lib PATH=bin:/usr/bin pytest; export PATH=./x"
    found = path_assignments(line)
    assert found == [
        ("PYTHONPATH", "$PYTHONPATH:src"),
        ("NODE_PATH", "lib"),
        ("PATH", "bin:/usr/bin"),
        ("PATH", "./x"),
    ]
    assert path_entries("$PYTHONPATH:src::/opt/lib", WS) == [f"{WS}/src", WS, "/opt/lib"]


def test_a_folder_on_the_checks_module_path_shadows_like_a_root() -> None:
    from dataclasses import replace

    p = replace(parse_policy(LOOP, "p.toml").bind(WS), harness_paths=(f"{WS}/src", f"{WS}/nm"))
    assert "shadowing the test runner (unittest)" in (
        member(p, f"{WS}/src/unittest/__main__.py") or ""
    )
    assert "shadowing the standard library (json)" in (member(p, f"{WS}/src/json.py") or "")
    assert "node test runner (mocha)" in (member(p, f"{WS}/nm/mocha/index.js") or "")
    assert member(p, f"{WS}/src/calc.py") is None  # the code under test: the allowed neighbour
    assert member(p, f"{WS}/src/pkg/json.py") is None  # pkg.json shadows nothing
    assert member(p, f"{WS}/mocha/index.js") is None  # node never looks for a package at a root


def test_a_package_init_above_an_acceptance_test_is_named_for_what_it_is() -> None:
    from dataclasses import replace

    p = replace(parse_policy(LOOP, "p.toml").bind(WS), harness_named=(f"{WS}/qa/__init__.py",))
    assert member(p, f"{WS}/qa/__init__.py") == (
        "a package __init__.py above an acceptance test (it runs before the tests it holds)"
    )
    assert member(p, f"{WS}/qa/other.py") is None
