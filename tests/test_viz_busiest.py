"""Lesson 04's busiest-rank figure: one line per algorithm, and a line on another's points
(naive and ps, Rabenseifner and ring load their busiest rank alike) drawn so both read."""

from __future__ import annotations

import pytest

from edu_parallel.core.i18n import language
from edu_parallel.viz import busiest_rank_figure
from edu_parallel.viz.busiest import SHARED_SHIFT


def _rows() -> list[dict]:
    loads = {  # busiest rank's bytes over D at N = 2, 4, 8, as traffic_table counts them
        "ring": [1.0, 1.5, 1.75],
        "naive": [1.0, 3.0, 7.0],
        "ps": [1.0, 3.0, 7.0],
        "rabenseifner": [1.0, 1.5, 1.75],
    }
    rows = [
        {"algo": a, "world_size": n, "supported": True, "busiest_over_d": y}
        for a, ys in loads.items()
        for n, y in zip((2, 4, 8), ys, strict=True)
    ]
    return rows + [{"algo": "tree", "world_size": 3, "supported": False}]


def test_a_line_on_anothers_points_is_dashed_open_and_shifted_so_both_read():
    fig = busiest_rank_figure(_rows())
    by = {t.name: t for t in fig.data}
    assert list(by) == ["ring", "naive", "ps (same as naive)", "rabenseifner (same as ring)"]
    naive, ps = by["naive"], by["ps (same as naive)"]
    assert list(ps.y) == list(naive.y) == [1.0, 3.0, 7.0]
    assert list(ps.x) == pytest.approx([n * SHARED_SHIFT for n in (2, 4, 8)])
    assert list(ps.customdata) == [2, 4, 8]  # hover says the real N
    assert (naive.line.dash, ps.line.dash) == ("solid", "dash")
    assert ps.marker.symbol == "square-open" and ps.marker.size > naive.marker.size
    assert naive.line.color != ps.line.color
    assert fig.layout.xaxis.type == "log" and list(fig.layout.xaxis.tickvals) == [2, 4, 8]
    assert fig.layout.legend.font.size >= 12  # lesson 04's matplotlib legend was 8 pt


def test_the_figure_reads_in_chinese_and_names_bad_rows():
    with language("zh"):
        fig = busiest_rank_figure(_rows())
        assert "ps" in fig.data[2].name and "same as" not in fig.data[2].name
        assert any("\u4e00" <= ch <= "\u9fff" for ch in fig.layout.title.text)
    with pytest.raises(ValueError, match="traffic_table"):
        busiest_rank_figure([{"algo": "ring", "supported": True}])
