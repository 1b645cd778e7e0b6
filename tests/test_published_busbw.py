"""Published NCCL busbw (models/published.py): cited, one home, and beside lesson 03's model.

The lesson's prose says the modelled ring's busbw approaches the line rate, NCCL's published ring
busbw sits below the model and NVLS's above the line rate; the figure and table read the numbers
from :data:`PUBLISHED_BUSBW`, and no lesson types them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from edu_parallel.core import busbw_gbps
from edu_parallel.models import (
    LINKS,
    PUBLISHED_BUSBW,
    cost_model,
    published_busbw_table,
    retime,
    simulate,
)
from edu_parallel.plans import ring_allreduce_plan

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
ISSUE = "https://github.com/NVIDIA/nccl-tests/issues/212"


def test_each_published_busbw_names_its_source_and_its_link():
    assert {(m.algorithm, m.busbw_gbps) for m in PUBLISHED_BUSBW.values()} == {
        ("Ring", 370.0),
        ("NVLS", 480.0),
    }
    for m in PUBLISHED_BUSBW.values():
        assert ISSUE in m.source and "2024-05-06" in m.source
        assert m.link in LINKS and (m.collective, m.ranks) == ("all_reduce", 8)
        # the system's line rate is the preset lesson 03 retimes on
        assert LINKS[m.link].bandwidth_Bps == LINKS["nvlink4-h100"].bandwidth_Bps


def test_the_model_lies_between_the_published_ring_and_nvls():
    model, n, size = cost_model("nvlink4-h100"), 8, 1 << 30  # lesson 03's largest size
    t = retime(simulate(ring_allreduce_plan(n), size, with_data=False)[0], model).duration
    modelled = busbw_gbps("all_reduce", n, size, t)
    line = model.link.bandwidth_Bps / 1e9
    ring, nvls = PUBLISHED_BUSBW["h100x8-ring"], PUBLISHED_BUSBW["h100x8-nvls"]
    assert ring.busbw_gbps < modelled < line < nvls.busbw_gbps
    assert modelled > 0.99 * line  # "approaches the link's bandwidth"


def test_the_table_shows_them_and_filters_by_link():
    table = published_busbw_table()
    assert list(table.index) == ["Ring", "NVLS"]
    assert list(table["busbw, published (GB/s, about)"]) == [370.0, 480.0]
    assert len(published_busbw_table("nvswitch-h100")) == 2
    assert published_busbw_table("nvlink3-a100").empty
    with pytest.raises(ValueError):
        published_busbw_table("no-such-link")


@pytest.mark.parametrize("lang", ["", "zh"])
def test_lesson_03_reads_them_from_the_home(lang):
    nb = json.loads((NOTEBOOKS / lang / "03_ring_allreduce.ipynb").read_text(encoding="utf-8"))
    code = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    prose = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    assert any("PUBLISHED_BUSBW" in s for s in code)
    assert any("published_busbw_table()" in s for s in code)
    for m in PUBLISHED_BUSBW.values():
        assert f"{m.busbw_gbps:g}" not in prose and f"{m.busbw_gbps:g}" not in "".join(code)
