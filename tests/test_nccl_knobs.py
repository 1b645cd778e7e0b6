"""Lesson 05's knobs: the table names the variables a cluster user meets, in both languages, and
``NCCL_MAX_NCHANNELS`` (``NcclSystem(max_channels=...)``) caps the channels NCCL's model runs."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from edu_parallel.core.i18n import language
from edu_parallel.models import NCCL_SYSTEMS, nccl_choose, nccl_knobs_table
from edu_parallel.models.nccl.knobs import KNOBS, max_channels_table
from edu_parallel.models.nccl.tuning import nccl_graph

H100 = NCCL_SYSTEMS["8x8-h100-ndr"]
CJK = re.compile(r"[\u4e00-\u9fff]")


def test_the_table_names_the_knobs_the_issue_asks_for():
    names = " ".join(k.name for k in KNOBS)
    for var in (
        "NCCL_ALGO",
        "NCCL_PROTO",
        "NCCL_MIN_NCHANNELS",
        "NCCL_MAX_NCHANNELS",
        "NCCL_IB_HCA",
        "NCCL_NET_GDR_LEVEL",
        "NCCL_PXN_DISABLE",
    ):
        assert var in names
    en = nccl_knobs_table()
    assert list(en.index) == [k.name for k in KNOBS]
    with language("zh"):
        zh = nccl_knobs_table()
        cells = zh._repr_html_()
    assert list(zh.index) == list(en.index)  # the names stay as typed
    assert "变量" in cells and "改变什么" in cells
    for effect, model in zip(zh.iloc[:, 1], zh.iloc[:, 2], strict=True):
        assert CJK.search(effect) and CJK.search(model), (effect, model)


def test_max_channels_caps_the_rings_and_trees_and_their_bandwidth():
    found = nccl_graph(H100, "Ring").channels
    assert found >= 8  # one per NIC of a DGX H100 across nodes
    for algo in ("Ring", "Tree"):
        assert nccl_graph(replace(H100, max_channels=2), algo).channels == 2
        assert nccl_graph(replace(H100, max_channels=found + 8), algo).channels == (
            nccl_graph(H100, algo).channels
        )
    table = max_channels_table(H100, 1 << 30, caps=(1, 2, 4, None))
    busbw = list(table.iloc[:, 2])
    assert busbw == sorted(busbw)  # more channels, more bandwidth, up to what the search found
    assert busbw[1] == pytest.approx(2 * busbw[0], rel=0.05)  # bandwidth-bound: linear
    assert list(table.iloc[:, 0]) == [1, 2, 4, found]
    forced = nccl_choose("all_reduce", 1 << 30, H100, nccl_algo="Ring", nccl_proto="Simple")
    assert table.iloc[-1, 1] == pytest.approx(forced.time_us, abs=0.05)  # unset: NCCL's own


@pytest.mark.parametrize("cap", [0, 65, 2.5, "8"])
def test_a_bad_max_channels_is_one_line_naming_the_option(cap):
    with pytest.raises(ValueError, match=r"^max_channels=") as err:
        replace(H100, max_channels=cap)
    assert "\n" not in str(err.value)
