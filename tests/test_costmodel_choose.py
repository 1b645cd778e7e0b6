"""The all-reduce chooser and the crossover, the tables, and `edu-parallel model`: no
processes."""

from __future__ import annotations

import json
import math

import pytest

from edu_parallel.app.cli import main
from edu_parallel.models.choose import CANDIDATES, choose_allreduce, crossover_size
from edu_parallel.models.cost import ALLREDUCE_ALGOS, NAMES, OTHER_COLLECTIVES, predict
from edu_parallel.models.tables import choice_table, prediction_table
from edu_parallel.models.topology import LINKS, Link, Topology

LINK = Link("test", alpha_s=1e-6, bandwidth_Bps=1e9)


# ------------------------------------------------------------------ chooser and crossover
def test_chooser_picks_a_tree_for_tiny_messages_on_many_ranks_and_the_ring_for_large() -> None:
    link = LINKS["nvlink4-h100"]
    tiny = choose_allreduce(1024, 256, link)
    assert tiny.algo in ("tree", "double-tree") and set(tiny.times) == set(CANDIDATES)
    assert tiny.times[tiny.algo] == min(tiny.times.values()) < tiny.times["ring"]
    assert "latency-bound" in tiny.reason and "log2 n" in tiny.reason and "tuning.cc" in tiny.reason
    large = choose_allreduce(1 << 30, 64, link)
    assert (
        large.algo == "ring" and "bandwidth-bound" in large.reason and "2(n-1)/n·S" in large.reason
    )
    assert choose_allreduce(1024, 2, link).algo == "ring"  # two ranks: no latency to save
    topo = Topology(4, 8, link, LINKS["ib-ndr-400"])
    assert "hierarchical" in choose_allreduce(1 << 20, 32, topo).times
    with pytest.raises(ValueError, match=r"candidates=\('ring', 'bogus'\) is not valid"):
        choose_allreduce(1024, 8, link, candidates=("ring", "bogus"))


@pytest.mark.parametrize("n", [8, 64, 512])
@pytest.mark.parametrize("b", ["tree", "double-tree"])
def test_crossover_is_where_the_predicted_times_are_equal(n: int, b: str) -> None:
    link = LINKS["ib-ndr-400"]
    x = crossover_size(n, link, "ring", b)
    ring, tree = predict("ring", n, x, link).time_s, predict(b, n, x, link).time_s
    assert ring == pytest.approx(tree, rel=1e-9)
    assert predict(b, n, x / 2, link).time_s < predict("ring", n, x / 2, link).time_s
    assert predict("ring", n, x * 2, link).time_s < predict(b, n, x * 2, link).time_s
    pair = ("ring", b)
    assert (
        choose_allreduce(x / 4, n, link, pair).algo == b
        and choose_allreduce(x * 4, n, link, pair).algo == "ring"
    )


def test_crossover_reports_when_the_curves_never_cross() -> None:
    with pytest.raises(
        ValueError, match=r"world_size=2 is not valid: .*'ring' is faster at every size"
    ):
        crossover_size(2, LINK, "ring", "tree")
    with pytest.raises(ValueError, match=r"b='trees' is not valid: expected one of ring, naive"):
        crossover_size(8, LINK, "ring", "trees")
    with pytest.raises(ValueError, match=r"world_size=1 is not valid: expected an integer >= 2"):
        crossover_size(1, LINK)


def test_crossover_figure_marks_the_crossing() -> None:
    from edu_parallel.viz.cost import crossover_figure

    fig = crossover_figure(64, "nvlink4")
    ax = fig.axes[0]
    assert len(ax.get_lines()) >= 4 and ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert any("ring = tree" in t.get_text() for t in ax.texts)
    assert fig._repr_png_()[0][:4] == b"\x89PNG"
    fig2 = crossover_figure(2, LINK)
    assert any("faster at every size" in t.get_text() for t in fig2.axes[0].texts)


# ------------------------------------------------------------------ CLI
def test_cli_model_json(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(
        [
            "model",
            "allreduce",
            "--algo",
            "ring",
            "--world-size",
            "64",
            "--size",
            "1GiB",
            "--link",
            "nvlink4-h100",
            "--json",
        ]
    )
    data = json.loads(capsys.readouterr().out)
    p = predict("ring", 64, 1 << 30, LINKS["nvlink4-h100"])
    assert rc == 0 and data["collective"] == "all_reduce" and data["algo"] == "ring"
    for key in ("time_s", "latency_s", "bandwidth_s", "algbw_gbps", "busbw_gbps"):
        assert data[key] == pytest.approx(getattr(p, key), rel=1e-12)
    assert data["formula"] == "2(n-1)·α + 2(n-1)/n·S/B"
    rc = main(
        [
            "model",
            "allreduce",
            "--algo",
            "hierarchical",
            "--world-size",
            "16",
            "--nodes",
            "2",
            "--link",
            "nvlink4",
            "--json",
        ]
    )
    data = json.loads(capsys.readouterr().out)
    topo = Topology(2, 8, LINKS["nvlink4-h100"], LINKS["ib-ndr-400"])
    assert rc == 0 and data["time_s"] == pytest.approx(
        predict("hierarchical", 16, 1 << 20, topo).time_s
    )
    assert (
        main(["model", "all_gather", "--world-size", "8", "--size", "64MiB", "--link", "ib-ndr"])
        == 0
    )
    text = capsys.readouterr().out
    assert "latency" in text and "bandwidth" in text and "busbw" in text and "ib-ndr-400" in text


@pytest.mark.parametrize(
    "args,message",
    [
        (
            ["--link", "nvlink9"],
            "error: --link='nvlink9' is not valid: expected one of nvlink4-h100, nvlink3-a100",
        ),
        (
            ["--world-size", "4", "--nodes", "8"],
            (
                "error: --nodes=8 is not valid: expected at most world_size=4: more pretend nodes"
                " than ranks"
            ),
        ),
        (["--alpha=-1e-6"], "error: --alpha=-1e-06 is not valid: expected a finite number >= 0"),
        (["--algo", "bogus"], "error: --algo='bogus' is not valid: expected one of 'ring'"),
        (["--size", "2GiB"], "error: --size='2GiB' is not valid"),
    ],
)
def test_cli_model_errors_are_one_line(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["model", "allreduce", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1


def test_algo_applies_to_allreduce_and_nccl_only(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["model", "all_to_all", "--algo", "tree"]) == 2
    assert capsys.readouterr().err == (
        "error: --algo='tree' is not valid: expected no value with COLLECTIVE='all_to_all':"
        " all_to_all is modelled by its one algorithm; --algo picks the all-reduce algorithm of"
        f" allreduce ({', '.join(ALLREDUCE_ALGOS)}) or NCCL_ALGO of nccl (Tree, Ring,"
        " CollNetDirect, CollNetChain, NVLS, NVLSTree, PAT)\n"
    )
    assert main(["model", "all_to_all", "--world-size", "4", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["algo"] is None
    assert main(["model", "allreduce", "--algo", "tree", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["algo"] == "tree"
    assert main(["model", "allgather_x"]) == 2  # the positional is named as it is typed
    assert capsys.readouterr().err.startswith("error: COLLECTIVE='allgather_x' is not valid")


def test_every_name_is_documented_in_one_table() -> None:
    assert set(ALLREDUCE_ALGOS) | set(OTHER_COLLECTIVES) == set(NAMES) and len(NAMES) == 14
    assert all(
        not math.isnan(
            predict(n, 4, 4096, LINK, **({"nodes": 2} if n == "hierarchical" else {})).time_s
        )
        for n in NAMES
    )


def test_prediction_and_choice_tables_equal_predict_and_choose() -> None:
    sizes, algos = (1024, 1 << 30), ("ring", "double-tree")
    table = prediction_table(algos, 64, sizes, "ib-ndr-400")
    assert list(table.index) == [(s, a) for s in sizes for a in algos]
    for s in sizes:
        for a in algos:
            p, row = predict(a, 64, s, "ib-ndr-400"), table.loc[(s, a)]
            assert row["time (µs)"] == p.time_s * 1e6
            assert row["latency (µs)"] == p.latency_s * 1e6
            assert row["bandwidth (µs)"] == p.bandwidth_s * 1e6
            assert row["busbw (GB/s)"] == p.busbw_gbps
    assert table.loc[(1024, "double-tree"), "time (µs)"] < table.loc[(1024, "ring"), "time (µs)"]
    topo = Topology(8, 8, LINKS["nvlink4-h100"], LINKS["ib-ndr-400"])
    chosen = choice_table(sizes, 64, topo)
    for s in sizes:
        c = choose_allreduce(s, 64, topo)
        assert chosen.loc[s, "chosen"] == c.algo
        assert {k: chosen.loc[s, f"{k} (µs)"] for k in c.times} == {
            k: t * 1e6 for k, t in c.times.items()
        }
    assert "hierarchical (µs)" in chosen.columns
