"""The lessons' tables from the parallelism folders show their headers in the learner's language.

Lessons 01, 08, 09, 10, 12 and 13 display these tables (issue 31). Each is built from a small
real run on 4 ranks and shown in both languages: the Chinese display has no English phrase of
three words or more in its headers, the English display no Chinese, and both keep the English
column names that the lessons' code indexes.
"""

from __future__ import annotations

import re

import pandas as pd
import pytest
from helpers import english_phrases

from edu_parallel.core.i18n import language
from edu_parallel.core.shown import ShownFrame

CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture(scope="module")
def tables(cluster4):
    from edu_parallel.compression import run_compress
    from edu_parallel.compression.sweep import summary_table
    from edu_parallel.expert_parallel import run_moe
    from edu_parallel.expert_parallel.tables import dispatch_table, experts_table, skew_table
    from edu_parallel.parallel_3d import run_3d
    from edu_parallel.parallel_3d.tables import layouts_table, ranks_table
    from edu_parallel.pipeline_parallel.report import run_pipeline
    from edu_parallel.pipeline_parallel.tables import bubble_table
    from edu_parallel.strategy_map.report import run_strategy_map
    from edu_parallel.strategy_map.tables import crossover_table, formula_table, message_table
    from edu_parallel.tensor_parallel import run_tp
    from edu_parallel.tensor_parallel import tables as tp_tables

    smap = run_strategy_map(cluster4)
    moe = run_moe(cluster4, experts=8, top_k=2, capacity_factor=1.25, tokens=16, hidden=8)
    tp = run_tp(cluster4, "mlp")
    three_d = run_3d(cluster4, dp=2, tp=2, pp=1)
    return {
        "formula_table": formula_table(smap),
        "crossover_table": crossover_table([smap]),
        "message_table": message_table([smap]),
        "skew_table": skew_table([moe]),
        "dispatch_table": dispatch_table([moe]),
        "experts_table": experts_table([moe]),
        "rule_table": tp_tables.rule_table([tp]),
        "tp message_table": tp_tables.message_table(tp),
        "pass_table": tp_tables.pass_table([tp]),
        "bubble_table": bubble_table([run_pipeline(cluster4, "1f1b", 4, 4)]),
        "ranks_table": ranks_table(three_d),
        "layouts_table": layouts_table([three_d]),
        "summary_table": summary_table([run_compress(cluster4, steps=2, compare_torch=False)]),
    }


def _headers(frame: pd.DataFrame) -> str:
    shown = frame.translated()
    return "\n".join(map(str, [*shown.columns, *shown.index.names]))


def test_each_table_shows_its_headers_in_the_learners_language(tables):
    for name, frame in tables.items():
        assert isinstance(frame, ShownFrame), f"{name} is a plain DataFrame: shown in English"
        with language("en"):
            en = _headers(frame)
        with language("zh"):
            zh = _headers(frame)
        assert not CJK.search(en), f"{name}: Chinese in the English headers: {en}"
        assert CJK.search(zh), f"{name}: no Chinese in the headers: {zh}"
        assert not english_phrases(zh), f"{name}: English in the Chinese headers: {zh}"
        with language("zh"):
            html = frame._repr_html_()
        assert CJK.search(html), f"{name}: Jupyter's HTML of the table is not translated"


def test_the_code_still_indexes_the_english_names(tables):
    with language("zh"):
        assert "params (trace, B)" in tables["formula_table"].columns
        assert tables["summary_table"]["ratio"].iloc[0] > 0
        assert list(tables["bubble_table"].index.names) == ["schedule", "M"]
