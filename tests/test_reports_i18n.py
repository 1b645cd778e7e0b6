"""Reports and tables in both languages: the Chinese has Chinese in it, and the same numbers.

For a few representative outputs a learner reads (a ring all-reduce run's tables from ``comm``,
the memory calculator's tables, a tensor-parallel report, the lesson-13 landscape tables), the
text is rendered in English and in Chinese, and:

* the Chinese text has CJK characters (it was translated);
* every number of the English text appears in the Chinese one (numbers and units are formatted
  outside the messages, so translation cannot change them);
* the tables keep their English column names in both languages (the lessons' code indexes them);
  only their display (``repr``, ``to_string``, Jupyter's HTML) is translated.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from html import escape as html_escape

import pandas as pd
import pytest
from helpers import SHOWN_NAMES, english_phrases

from edu_parallel.app.course.frameworks import frameworks_table, mapping_table
from edu_parallel.app.course.landscape import backend_table, libraries_table
from edu_parallel.comm import run_allreduce
from edu_parallel.comm.allreduce import format_report
from edu_parallel.comm.collective import format_collective, run_collective
from edu_parallel.comm.tables import bandwidth_table, phase_table, ring_volume_table
from edu_parallel.core.i18n import language
from edu_parallel.core.shown import ShownFrame
from edu_parallel.core.width import width
from edu_parallel.memory import get_preset, model_state_bytes
from edu_parallel.memory.tables import conventions_table, estimates_table
from edu_parallel.models import prediction_table
from edu_parallel.plans.checker import explain
from edu_parallel.plans.ring import ring_allreduce_plan
from edu_parallel.tensor_parallel import format_tp, run_tp
from edu_parallel.viz import wrapped

CJK = re.compile(r"[\u4e00-\u9fff]")
NUMBER = re.compile(r"\d+(?:[.,]\d+)*(?:e[-+]?\d+)?")


def text_of(output: object) -> str:
    """A report's text, or a table as the learner sees it (all of it: no elided columns)."""
    if isinstance(output, pd.DataFrame):
        return output.to_string()
    return str(output)


def both(render: Callable[[], object]) -> tuple[str, str]:
    with language("en"):
        en = text_of(render())
    with language("zh"):
        zh = text_of(render())
    return en, zh


def assert_translated(en: str, zh: str) -> None:
    assert not CJK.search(en), "the English output has Chinese in it"
    assert CJK.search(zh), f"no Chinese in:\n{zh}"
    missing = sorted(set(NUMBER.findall(en)) - set(NUMBER.findall(zh)))
    assert not missing, f"numbers of the English output missing from the Chinese: {missing}"


@pytest.fixture(scope="module")
def ring_report(cluster4):
    return run_allreduce(cluster4, 64, "int64", pattern="powers_of_two")


@pytest.mark.parametrize("table", [phase_table, lambda r: ring_volume_table([r])])
def test_ring_allreduce_tables_in_both_languages(ring_report, table) -> None:
    assert_translated(*both(lambda: table(ring_report)))


def test_tables_keep_english_columns_for_code_in_chinese(ring_report) -> None:
    with language("zh"):
        table = phase_table(ring_report)
        assert isinstance(table, ShownFrame) and "sent (B)" in table.columns
        assert table.loc["both phases", "sent (B)"] == ring_report.per_rank_sent_bytes[0]
        shown = table.to_string() + table._repr_html_()
        assert "发送（B）" in shown and "两阶段合计" in shown and "sent (B)" not in shown
        picked = table[["sent (B)"]]  # a selection is shown translated too
        assert "发送（B）" in repr(picked) and "发送（B）" in repr(table.T)
    with language("en"):
        assert "sent (B)" in repr(table) and "both phases" in repr(table)


def test_bandwidth_table_in_both_languages(cluster4) -> None:
    reports = [run_allreduce(cluster4, size) for size in ("64KiB", "1MiB")]
    en, zh = both(lambda: bandwidth_table(reports))
    assert_translated(en, zh)
    assert "算法带宽" in zh and "总线带宽" in zh


def test_memory_tables_in_both_languages() -> None:
    estimates = {f"ZeRO-{s}": model_state_bytes(7.5e9, 64, zero=s) for s in (0, 1, 2, 3)}
    assert_translated(*both(lambda: estimates_table(estimates)))
    shape = get_preset("llama3-8b")
    en, zh = both(lambda: conventions_table(shape, gpus=64, gpus_per_node=8).round(2))
    assert_translated(en, zh)
    assert "ZeRO 论文 GB/GPU" in zh and "卸载" in zh


def test_prediction_table_in_both_languages() -> None:
    make = lambda: prediction_table(("ring", "tree"), 64, (1024, 1 << 20), "ib-ndr-400")  # noqa: E731
    assert_translated(*both(make))


def test_tensor_parallel_report_in_both_languages(cluster2) -> None:
    report = run_tp(cluster2, "column")
    en, zh = both(lambda: format_tp(report))
    assert_translated(en, zh)
    assert "列并行" in zh


@pytest.mark.parametrize("table", [libraries_table, backend_table, frameworks_table, mapping_table])
def test_landscape_tables_in_both_languages(table) -> None:
    assert_translated(*both(table))


def test_landscape_wrapped_table_shows_chinese_headers() -> None:
    with language("zh"):
        html = wrapped(libraries_table()).to_html()
    assert "硬件" in html and "开发方" in html
    with language("en"):
        assert "hardware" in wrapped(libraries_table()).to_html()


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_shown_table_keeps_every_word_of_a_long_cell(lang) -> None:
    """Lesson 15's frameworks table: pandas cut each cell past 50 characters to '...', the
    citations too; a shown table (text and HTML) keeps them whole."""
    with language(lang):
        table = frameworks_table()
        text, html = table.to_string() + repr(table), table._repr_html_()
    cells = [str(v) for v in pd.DataFrame(table).to_numpy().ravel()]
    assert max(len(c) for c in cells) > 50  # there is a long cell to keep
    for cell in cells:
        assert cell in text and html_escape(cell, quote=False) in html, cell[:60]


# --- the collectives' text reports: Chinese, no English phrase, columns aligned ---------------


def table_widths(text: str, first: str) -> set[int]:
    """Display widths of a table's header (the line starting with ``first``) and of its rows
    (the lines after it that start with a number)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(first))
    block = [lines[start]]
    for line in lines[start + 1 :]:
        if not re.match(r"\s*\d", line):
            break
        block.append(line)
    assert len(block) > 1, f"no rows under {first!r}"
    return {width(line.rstrip()) for line in block}


def assert_no_english(en: str, zh: str) -> None:
    assert_translated(en, zh)
    assert english_phrases(en), f"the scan finds nothing in the English:\n{en}"
    found = english_phrases(zh, allow=SHOWN_NAMES)
    assert not found, f"English in the Chinese: {found}\n{zh}"


def test_ring_report_in_chinese_with_its_columns_aligned(ring_report) -> None:
    en, zh = both(lambda: format_report(ring_report))
    assert_no_english(en, zh)
    assert en.startswith("ring all-reduce: 4 ranks, 64 B per rank (int64)")
    assert "AllReduce" in zh.splitlines()[0] and "与 dist.all_reduce 一致：是" in zh
    for text, step, rank in ((en, "step", "rank"), (zh, "步骤", "rank")):
        assert len(table_widths(text, step)) == 1, text  # header and every step row
        assert len(table_widths(text, rank)) == 1, text  # header and every rank row


def test_collective_report_in_chinese_with_its_columns_aligned(cluster4) -> None:
    report = run_collective(cluster4, "all_gather", 64)
    en, zh = both(lambda: format_collective(report))
    assert_no_english(en, zh)
    assert "formula: sent (n-1)/n * S each; received (n-1)/n * S each" in en
    assert "公式：发送 = 每个 rank (n-1)/n * S" in zh
    assert len(table_widths(en, "rank")) == 1 and len(table_widths(zh, "rank")) == 1


def test_plan_checker_explains_a_double_count_in_chinese() -> None:
    plan = ring_allreduce_plan(4)
    broken = dataclasses.replace(plan, steps=plan.steps[:2] + plan.steps[1:2] + plan.steps[3:])
    en, zh = both(lambda: explain(broken))
    assert_no_english(en, zh)
    assert "counted twice" in en and "重复计数" in zh
    assert "rank 1 把 {0,3} 加到已含" in zh
    grid = zh.split("\n\n")[0].splitlines()
    assert len({width(line.rstrip()) for line in grid}) <= 2  # the header and the rows line up
    assert width(grid[0][:6]) == 6 and grid[0].startswith("rank")
    valid = both(lambda: explain(plan))
    assert valid[0].endswith("valid: it computes all_reduce in 6 steps")
    assert valid[1].endswith("计划 ring_allreduce 有效：它用 6 步完成 all_reduce")
