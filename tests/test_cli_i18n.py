"""The command line in Chinese (``EDU_PARALLEL_LANG=zh``) and in English: help texts, argparse's
own words and one-line errors. No cluster starts: only ``--help`` and argument errors."""

from __future__ import annotations

import argparse
import re

import pytest
from helpers import cli, english_phrases, every_parser

from edu_parallel.app.cli import argparse_in_language, build_parser
from edu_parallel.app.help_width import DisplayWidthHelpFormatter
from edu_parallel.core.i18n import language
from edu_parallel.core.width import width

CJK = re.compile(r"[\u4e00-\u9fff]")
# argparse's English words that must not show through in Chinese
ARGPARSE_ENGLISH = ("usage:", "options:", "positional arguments", "show this help message")


def test_top_level_help_in_chinese():
    out = cli("--help", lang="zh")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert CJK.search(text)
    assert text.startswith("用法：edu-parallel")
    assert "显示此帮助信息并退出" in text and "位置参数" in text
    for command in ("run", "plan", "model", "memory", "planner", "exercise", "lab", "-h, --help"):
        assert command in text
    for word in ARGPARSE_ENGLISH:
        assert word not in text
    assert "显示程序的版本号并退出" in text  # --version's help, argparse's own words
    assert not english_phrases(text), english_phrases(text)


def test_run_ring_help_in_chinese_keeps_options_and_values():
    out = cli("run", "ring", "--help", lang="zh")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "用法：edu-parallel run ring" in text and "选项" in text
    assert "AllReduce 算法" in text and "进程总数" in text  # the glossary's terms
    for kept in (
        "--world-size",
        "--backend",
        "--chrome-trace",
        "--algo",
        "--servers",
        "gloo",
        "nccl",
        "rabenseifner",
        "1MiB",
        "float32",
        "ps/ps-sharded",
    ):
        assert kept in text, kept
    for word in ARGPARSE_ENGLISH + ("default", "ranks,", "bytes per rank"):
        assert word not in text, word


@pytest.mark.parametrize(
    "args, kept",
    [
        (("run", "nosuch"), ("'nosuch'", "CONCEPT", "无效的选择")),  # argparse's choice error
        (("run", "ring", "--world-size", "x"), ("--world-size", "'x'", "int")),  # argparse's type
        (("run", "ring", "--world-size", "0"), ("--world-size=0", "[1, 16]")),  # the package's
        (("plan", "ring", "--world-size", "300"), ("--world-size=300", "`edu-parallel model`")),
        (("exercise", "hint", "ring"), ("exercise='ring'", "以下之一：02, 03")),  # core.one_of
        (("model", "ring"), ("COLLECTIVE='ring'", "以下之一：allreduce")),
        (("run", "3d", "--world-size", "6", "--tp", "4"), ("--tp=4", "world_size=6 的约数")),
    ],
)
def test_errors_in_chinese_are_one_line(args, kept):
    out = cli(*args, lang="zh")
    assert out.returncode == 2
    assert out.stdout == ""
    line = out.stderr.strip()
    assert "\n" not in line and "Traceback" not in line
    assert line.startswith("错误：")
    assert CJK.search(line.removeprefix("错误："))
    for text in kept:
        assert text in line, text
    assert "error:" not in line and "invalid choice" not in line and "expected" not in line
    prose = re.sub(r"以下之一：[^；]*", "以下之一：…", line)  # a list of choices is not prose
    assert not english_phrases(prose), line


@pytest.mark.parametrize(
    "args",
    [
        ("--help",),
        ("run", "ring", "--help"),
        ("run", "nosuch"),
        ("run", "ring", "--world-size", "x"),
        ("run", "ring", "--world-size", "0"),
    ],
)
def test_english_has_no_chinese(args):
    out = cli(*args, lang="en")
    text = out.stdout + out.stderr
    assert not CJK.search(text), text
    if "--help" in args:
        assert out.returncode == 0 and out.stdout.startswith("usage: edu-parallel")
    else:
        assert out.returncode == 2 and out.stderr.startswith("error: ")
        assert "\n" not in out.stderr.strip()


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_commands_help_formats_in_both_languages(lang):
    """argparse %-formats each help text: a stray % (say "80%") in either language would crash
    ``--help``; and every command's help reads in the chosen language."""
    with language(lang), argparse_in_language():
        parsers = every_parser(build_parser())
        helps = {p.prog: p.format_help() for p in parsers}
    assert len(helps) > 25 and "edu-parallel run compress" in helps
    for prog, text in helps.items():
        if lang == "zh":
            assert text.startswith("用法：") and CJK.search(text), prog
        else:  # the --lang options name 简体中文 in English too
            assert text.startswith("usage: ") and not CJK.search(text.replace("简体中文", "")), prog


def _too_wide(help_text: str, columns: int) -> list[str]:
    """The lines of a help text wider than ``columns`` on a terminal, but for one that is a single
    word (a list of choices such as ``{run,plan,...}``: argparse cannot break it in either
    language)."""
    return [
        line for line in help_text.splitlines() if width(line) > columns and " " in line.strip()
    ]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_commands_help_fits_the_terminal_by_display_width(lang, monkeypatch):
    """argparse wraps help to the terminal's width less 2; a CJK character takes two columns
    there (``app/help_width.py``), so the Chinese help fits as the English does, its usage lines
    aligned under the first option."""
    monkeypatch.setenv("COLUMNS", "80")
    with language(lang), argparse_in_language():
        helps = {p.prog: p.format_help() for p in every_parser(build_parser())}
    wide = {prog: lines for prog, text in helps.items() if (lines := _too_wide(text, 78))}
    assert not wide, wide
    usage = helps["edu-parallel run reducescatter"].splitlines()
    start = usage[0].index("[-h]")
    assert width(usage[0][:start]) == len(usage[1]) - len(usage[1].lstrip()), usage[:2]


def test_a_help_wrapped_by_character_count_would_run_past_the_terminal(monkeypatch):
    """The planted case: argparse's own formatter counts a CJK character as one column."""
    monkeypatch.setenv("COLUMNS", "80")
    help_text = "在由工作进程组成的本地集群上运行一个概念，" * 4
    plain = argparse.ArgumentParser(prog="x", formatter_class=argparse.HelpFormatter)
    plain.add_argument("--go", help=help_text)
    assert _too_wide(plain.format_help(), 78)
    fitted = argparse.ArgumentParser(prog="x", formatter_class=DisplayWidthHelpFormatter)
    fitted.add_argument("--go", help=help_text)
    assert not _too_wide(fitted.format_help(), 78)


@pytest.mark.parametrize(
    "args",
    [
        ("memory", "--model", "llama3-8b", "--gpus", "64", "--zero", "3"),
        ("memory", "--model", "llama3-8b", "--gpus", "64", "--zero", "3", "--convention",
         "deepspeed", "--gpus-per-node", "8", "--offload", "optimizer"),
        ("memory", "--model", "llama3-8b", "--gpus", "64", "--zero", "1", "--convention",
         "megatron"),
        ("memory", "--params", "7e9", "--gpus", "8", "--zero", "2", "--convention", "deepspeed",
         "--gpus-per-node", "4"),
    ],
)  # fmt: skip
def test_the_memory_calculator_speaks_chinese(args):
    """Its formulas, headers and row labels in Chinese (the JSON keys, symbols, citations and
    dtype names such as param16 stay as written), and its lines fit the output area."""
    from helpers import english_phrases

    from edu_parallel.core.width import MAX_TEXT_COLUMNS, width

    out = cli(*args, lang="zh")
    assert out.returncode == 0, out.stderr
    allowed = {"DeepSpeed 0.16.5 (commit", "et al. 2019,", "et al. 2021, ZeRO-Offload"}
    assert not english_phrases(out.stdout, allow=allowed), out.stdout
    assert max(map(width, out.stdout.splitlines())) <= MAX_TEXT_COLUMNS
