"""NCCL's tuning model (models/nccl/tuning.py, nccl_select.py, nccl_systems.py) against NCCL 2.30.7.

The hand-traced cases follow ``src/graph/tuning.cc`` at tag v2.30.7-1 line by line
(``ncclTopoTuneModel`` for the tables, ``ncclTopoGetAlgoTime`` for the time); each test says which
constants it reads. Graph inputs (channels x per-channel GB/s) come from the search approximation
described in ``nccl_tuning.py`` and are traced too.
"""

from __future__ import annotations

import json
import math

import pytest

from edu_parallel.app.cli import main
from edu_parallel.models import LINKS, Topology, choice_table, choose_allreduce, predict
from edu_parallel.models.nccl.selection import nccl_choose, parse_nccl_list
from edu_parallel.models.nccl.systems import NCCL_SYSTEMS, nccl_system
from edu_parallel.models.nccl.tuning import NcclSystem, nccl_entry, nccl_graph, nccl_time
from edu_parallel.models.tables import (
    nccl_applicability_table,
    nccl_choice_table,
    nccl_winner_table,
)
from edu_parallel.viz import nccl_choice_figure
from edu_parallel.viz.fit import fit_problems
from edu_parallel.viz.nccl_choice import winner_bands

GiB = 1 << 30
H100_8x8 = NCCL_SYSTEMS["8x8-h100-ndr"]
DGX = NCCL_SYSTEMS["dgx-h100"]


def h100_nodes(nodes: int, nics: int = 8) -> NcclSystem:
    topo = Topology(nodes, 8, LINKS["nvlink4-h100"], LINKS["ib-ndr-400"], nics_per_node=nics)
    return NcclSystem(topo, "hopper", nvswitch=True)


# ------------------------------------------------------------------ hand-traced cases
def test_graph_of_8x8_h100_is_one_channel_per_nic_at_a_search_speed() -> None:
    # nic 50 GB/s, NVLink 450/8 = 56.25 per channel -> cap 50; sm90SpeedArrayInter: 48 fits.
    # ncclTopoDupChannels: ccMin 90 > 80, bwIntra 48 < 50, 8 channels > 4 -> no doubling.
    g = nccl_graph(H100_8x8, "Ring")
    assert (g.channels, g.bw_intra, g.bw_inter, g.hw_intra) == (8, 48.0, 48.0, "nvlink")
    # one NIC: 1 channel at 48, doubled (1 channel is not > 4) -> 2 x 24
    g1 = nccl_graph(h100_nodes(8, nics=1), "Ring")
    assert (g1.channels, g1.bw_inter) == (2, 24.0)


def test_ring_simple_all_reduce_on_8x8_h100_matches_tuning_cc() -> None:
    # baseLatencies[Ring][Simple] = 8.4; nsteps = 2(64-1) = 126, nInterSteps = 2(8-1) = 14;
    # intraLat = hw[NVLINK][Ring][Simple] = 3.4 (> netOverhead 1.0 x 3 for Simple, Intel);
    # interLat = hw[NET][Ring][Simple] = 14.0 (ppn 8 != 1), latencyInter 0.
    e = nccl_entry("all_reduce", "Ring", "Simple", H100_8x8)
    assert e.latency_us == pytest.approx(8.4 + 112 * 3.4 + 14 * 14.0)  # 585.2
    # busBw = nChannels x bwInter (nNodes > 2) = 8 x 48; no Ring/Simple refinement;
    # algbw = busBw x nRanks / nsteps = 384 x 64 / 126
    assert e.bandwidth_gbps == pytest.approx(384 * 64 / 126)
    # ncclTopoGetAlgoTime: nBytes / (nChannels x nRanks) = 2^30 / 512 >= 64 -> lat x 1.4 (sm90)
    t = nccl_time("all_reduce", "Ring", "Simple", GiB, H100_8x8)
    assert t.latency_us == pytest.approx(585.2 * 1.4)
    assert t.time_us == pytest.approx(585.2 * 1.4 + GiB / (1000 * 384 * 64 / 126))
    # 16 KiB: 2^14 / 512 = 32 < 64 -> no plateau factor
    assert nccl_time("all_reduce", "Ring", "Simple", 1 << 14, H100_8x8).latency_us == pytest.approx(
        585.2
    )


def test_tree_all_reduce_on_8x8_h100_matches_tuning_cc() -> None:
    # Tree/Simple: 8.4 + 2 x ((8-1) x hw[NVLINK][Tree][Simple] 4.0 + log2i(8) x hw[NET][Tree]
    # [Simple] 14) = 148.4; busBw = min(384 x .92, 8 x perChMaxTreeBws[Hopper][N4] 36.0) = 288,
    # then x .5 (tree: algbw = busBw / 2)
    e = nccl_entry("all_reduce", "Tree", "Simple", H100_8x8)
    assert (e.latency_us, e.bandwidth_gbps) == (pytest.approx(148.4), pytest.approx(144.0))
    # Tree/LL: 6.8 + 2 x (7 x 0.6 + 3 x 5.0) = 45.2; busBw 288 -> min(288 / 3.8, llMaxBws
    # [Intel row][N4] 20.4) = 20.4 -> x .5 = 10.2
    ll = nccl_entry("all_reduce", "Tree", "LL", H100_8x8)
    assert (ll.latency_us, ll.bandwidth_gbps) == (pytest.approx(45.2), pytest.approx(10.2))
    # 1 KiB: log2i(1024 >> 6) = 4 -> treeCorrectionFactor[LL][4] = 0.9
    t = nccl_time("all_reduce", "Tree", "LL", 1024, H100_8x8)
    assert t.time_us == pytest.approx(45.2 + 1024 / (1000 * 10.2 * 0.9))
    # 1 GiB: log2i(2^24) = 24 >= 23 -> no correction
    assert nccl_time("all_reduce", "Tree", "Simple", GiB, H100_8x8).bandwidth_gbps == 144.0


def test_single_dgx_ring_ll_and_nvls_match_tuning_cc() -> None:
    # graph: NVLink 450 GB/s -> sm90SpeedArrayIntra 60 fits, 450 // 60 = 7 channels, doubled
    # (60 >= 50) -> 14 x 30 = 420. Ring/LL: 6.6 + 14 x hw[NVLINK][Ring][LL] 0.6 = 15.0;
    # busBw min(llMaxBws[Hopper][N1] 141, 420 x .5) = 141 -> x 8/14
    assert (nccl_graph(DGX, "Ring").channels, nccl_graph(DGX, "Ring").bw_intra) == (14, 30.0)
    e = nccl_entry("all_reduce", "Ring", "LL", DGX)
    assert (e.latency_us, e.bandwidth_gbps) == (pytest.approx(15.0), pytest.approx(141 * 8 / 14))
    # NVLS: 8 channels (one per GPU), 450/8 -> 50; intraBw = 50 x nvlsEfficiency[Hopper] .85 x
    # 7/8 x 2 (all-reduce) = 74.4 > interBw 50 -> 8 x 50 = 400 x 8/14; latency = hw[NVLINK][NVLS]
    # [Simple] = 25 (replaces the base), no network
    nv = nccl_entry("all_reduce", "NVLS", "Simple", DGX)
    assert (nv.latency_us, nv.bandwidth_gbps) == (25.0, pytest.approx(400 * 8 / 14))


def test_sharp_collnet_chain_and_nvls_across_nodes() -> None:
    s = NCCL_SYSTEMS["8x8-h100-ndr-sharp"]
    # CollNetChain: 2 x 7 x hw[NVLINK][CollNetChain][Simple] 2.8 + hw[NET][..] 30 = 69.2;
    # busBw = 8 x bwIntra 48 (collnet uses bwIntra), x .5
    cc = nccl_entry("all_reduce", "CollNetChain", "Simple", s)
    assert (cc.latency_us, cc.bandwidth_gbps) == (pytest.approx(69.2), pytest.approx(192.0))
    # NVLS across nodes: intraLat 25 + interLat hw[NET][NVLS][Simple] 18 = 43
    assert nccl_entry("all_reduce", "NVLS", "Simple", s).latency_us == pytest.approx(43.0)


# ------------------------------------------------------------------ shape of the model
@pytest.mark.parametrize("nodes", [2, 4, 8, 16, 32])
def test_tree_latency_grows_with_log2_of_nodes_not_ranks(nodes: int) -> None:
    e = nccl_entry("all_reduce", "Tree", "Simple", h100_nodes(nodes))
    per_level = 2 * 14.0  # two passes x hw[NET][Tree][Simple]
    assert e.latency_us == pytest.approx(8.4 + 2 * 7 * 4.0 + math.log2(nodes) * per_level)
    ranks = 8 * nodes
    assert e.latency_us < 8.4 + 2 * 7 * 4.0 + math.log2(ranks) * per_level


def test_cost_py_double_tree_latency_uses_log2_of_nodes_on_a_topology() -> None:
    intra, inter = LINKS["nvlink4-h100"], LINKS["ib-ndr-400"]
    for nodes in (2, 4, 8, 16):
        topo = Topology(nodes, 8, intra, inter, nics_per_node=8)
        p = predict("double-tree", 8 * nodes, 1 << 20, topo)
        levels = nodes.bit_length() - 1
        assert p.latency_s == pytest.approx(2 * (7 * intra.alpha_s + levels * inter.alpha_s))
        assert "log2 K" in p.formula
    flat = predict("double-tree", 64, 1 << 20, inter)  # one link: log2 of the ranks, as before
    assert flat.latency_s == pytest.approx(2 * 6 * inter.alpha_s)


def test_cross_node_bus_bandwidth_is_bounded_by_nics_times_nic_bandwidth() -> None:
    n = 64
    ring = nccl_entry("all_reduce", "Ring", "Simple", H100_8x8)
    busbw = ring.bandwidth_gbps * 2 * (n - 1) / n
    assert 4 * 50 < busbw <= 8 * 50  # eight NDR rails, not one
    one = nccl_entry("all_reduce", "Ring", "Simple", h100_nodes(8, nics=1))
    assert one.bandwidth_gbps * 2 * (n - 1) / n <= 50


@pytest.mark.parametrize("name", sorted(NCCL_SYSTEMS))
def test_ll_wins_tiny_messages_and_simple_wins_huge_ones(name: str) -> None:
    s = NCCL_SYSTEMS[name]
    tiny, huge = nccl_choose("all_reduce", 1024, s), nccl_choose("all_reduce", 8 * GiB, s)
    assert huge.proto == "Simple"
    if s.collnet:  # in-network reduction: one switch hop beats every software protocol
        assert (tiny.algo, tiny.proto) == ("NVLS", "Simple")
    else:
        assert tiny.proto == "LL"
    assert tiny.time_us == min(t.time_us for t in tiny.times.values())


def test_nvls_collnet_pat_and_ll128_only_where_they_apply() -> None:
    def runs(name: str, coll: str = "all_reduce") -> set[str]:
        return {f"{a}/{p}" for a, p in nccl_choose(coll, 1 << 20, nccl_system(name)).times}

    assert "NVLS/Simple" in runs("dgx-h100") and "NVLSTree/Simple" not in runs("dgx-h100")
    assert "NVLSTree/Simple" in runs("8x8-h100-ndr") and "NVLS/Simple" not in runs("8x8-h100-ndr")
    assert {"NVLS/Simple", "CollNetChain/Simple", "CollNetDirect/Simple"} <= runs(
        "8x8-h100-ndr-sharp"
    )
    a100 = nccl_choose("all_reduce", 1 << 20, nccl_system("2x8-a100-hdr"))
    assert not any(a.startswith("NVLS") for a, _ in a100.times)
    assert "Hopper" in a100.excluded[("NVLS", "Simple")]
    assert "PAT/Simple" in runs("4x1-pcie-25gbe", "all_gather")
    assert "PAT/Simple" not in runs("8x8-h100-ndr", "all_gather")
    assert not any(r.startswith("PAT") for r in runs("4x1-pcie-25gbe"))  # not for all-reduce
    assert not any(r.endswith("LL128") for r in runs("4x1-pcie-25gbe"))  # NIC off the GPU switch
    assert "Ring/LL128" in runs("2x8-a100-hdr")
    assert runs("dgx-h100", "broadcast") == {"Ring/LL", "Ring/LL128", "Ring/Simple"}
    with pytest.raises(ValueError, match="PAT serves all-gather and reduce-scatter only"):
        nccl_entry("all_reduce", "PAT", "Simple", nccl_system("4x1-pcie-25gbe"))


def test_nccl_algo_and_nccl_proto_force_a_choice() -> None:
    free = nccl_choose("all_reduce", 1024, H100_8x8)
    assert (free.algo, free.proto) == ("Tree", "LL")
    ring = nccl_choose("all_reduce", 1024, H100_8x8, nccl_algo="Ring")
    assert ring.algo == "Ring" and all(a == "Ring" for a, _ in ring.times)
    no_ll = nccl_choose("all_reduce", 1024, H100_8x8, nccl_proto="^LL")
    assert no_ll.proto != "LL" and all(p != "LL" for _, p in no_ll.times)
    assert parse_nccl_list("ring;allreduce:tree", ("Tree", "Ring"), "all_reduce", "a") == {"Tree"}
    assert parse_nccl_list("ring;allreduce:tree", ("Tree", "Ring"), "all_gather", "a") == {"Ring"}
    with pytest.raises(ValueError, match="nccl_algo='Bogus' is not valid"):
        nccl_choose("all_reduce", 1024, H100_8x8, nccl_algo="Bogus")
    with pytest.raises(ValueError, match="nccl_algo/nccl_proto"):
        nccl_choose("all_gather", 1024, H100_8x8, nccl_algo="Tree")  # no tree all-gather


def test_reason_names_the_deciding_terms() -> None:
    c = nccl_choose("all_reduce", 1024, H100_8x8)
    assert "latency" in c.reason and "runner-up" in c.reason and "2.30.7" in c.reason
    assert "its lower latency decides" in c.reason or "both terms are lower" in c.reason
    big = nccl_choose("all_reduce", 8 * GiB, nccl_system("2x8-a100-hdr"))
    assert "higher bandwidth decides" in big.reason


def test_choose_allreduce_answers_with_nccl_for_a_system_and_keeps_alpha_beta() -> None:
    c = choose_allreduce(1024, 64, H100_8x8)
    assert (c.algo, c.proto) == ("Tree", "LL")
    assert c.times["Tree/LL"] == pytest.approx(
        nccl_choose("all_reduce", 1024, H100_8x8).time_us * 1e-6
    )
    forced = choose_allreduce(1 << 20, 64, H100_8x8, nccl_algo="Ring", nccl_proto="Simple")
    assert (forced.algo, forced.proto) == ("Ring", "Simple")
    assert choose_allreduce(1024, 64, LINKS["ib-ndr-400"]).proto == ""  # the alpha-beta chooser
    with pytest.raises(ValueError, match="world_size=32 is not valid"):
        choose_allreduce(1024, 32, H100_8x8)
    with pytest.raises(ValueError, match="None unless an NcclSystem"):
        choose_allreduce(1024, 64, LINKS["ib-ndr-400"], nccl_algo="Ring")
    table = choice_table([1024, GiB], 64, H100_8x8)
    assert list(table["chosen"]) == ["Tree", "NVLSTree"]


def test_tables_of_nccl_choices() -> None:
    sizes = [1 << k for k in range(4, 34, 4)]
    t = nccl_choice_table("all_reduce", sizes, H100_8x8)
    for size, row in t.iterrows():
        c = nccl_choose("all_reduce", size, H100_8x8)
        assert (row["algorithm"], row["protocol"]) == (c.algo, c.proto)
        cand = [v for k, v in row.items() if "/" in k]
        assert row["time (µs)"] == min(cand)
        assert row["time (µs)"] == pytest.approx(row["latency (µs)"] + row["bandwidth (µs)"])
    w = nccl_winner_table("all_reduce", sizes, list(NCCL_SYSTEMS.values()))
    assert list(w.columns) == list(NCCL_SYSTEMS) and list(w.index) == sizes
    assert w.loc[sizes[0], "8x8-h100-ndr"] == "Tree/LL"
    assert len(set(w["8x8-h100-ndr"])) >= 3  # errata E9: the choice changes with size


def test_bad_inputs_raise_one_line_errors() -> None:
    with pytest.raises(ValueError, match="arch='pascal' is not valid"):
        NcclSystem(H100_8x8.topology, "pascal")
    with pytest.raises(ValueError, match="nvls=True is not valid"):
        NcclSystem(H100_8x8.topology, "ampere", nvswitch=True, nvls=True)
    with pytest.raises(ValueError, match="coll='alltoall' is not valid"):
        nccl_choose("alltoall", 1024, H100_8x8)
    with pytest.raises(ValueError, match="system='dgx' is not valid"):
        nccl_system("dgx")
    with pytest.raises(ValueError, match="nbytes=-1 is not valid"):
        nccl_time("all_reduce", "Ring", "LL", -1, H100_8x8)


def test_nccl_choice_figure_draws_every_candidate_and_the_winner_bands() -> None:
    fig = nccl_choice_figure(H100_8x8)
    ax, strip = fig.axes
    labels = {line.get_label() for line in ax.get_lines()}
    assert {f"{a}/{p}" for a, p in nccl_choose("all_reduce", 8, H100_8x8).times} < labels
    bands = winner_bands("all_reduce", [1 << k for k in range(3, 34)], H100_8x8)
    assert [b[2] for b in bands][:2] == ["Tree/LL", "Tree/LL128"]
    texts = {t.get_text() for t in strip.texts}
    assert {"Tree/LL", "Tree/LL128", "NVLSTree/Simple"} <= texts
    assert fit_problems(fig) == []


def test_applicability_table_says_where_each_pair_runs_and_why_not() -> None:
    t = nccl_applicability_table("all_reduce", list(NCCL_SYSTEMS.values()))
    assert len(t) == 21 and t.loc["PAT/Simple", "since NCCL"] == "2.23"
    assert t.loc["NVLS/Simple", "dgx-h100"] == "runs"
    assert "Hopper" in t.loc["NVLS/Simple", "2x8-a100-hdr"]
    assert "IB SHARP" in t.loc["CollNetChain/Simple", "8x8-h100-ndr"]
    assert t.loc["CollNetChain/Simple", "8x8-h100-ndr-sharp"] == "runs"
    for name in NCCL_SYSTEMS:  # "runs" exactly where nccl_choose times the pair
        c = nccl_choose("all_reduce", 1 << 20, NCCL_SYSTEMS[name])
        assert {i for i in t.index if t.loc[i, name] == "runs"} == {f"{a}/{p}" for a, p in c.times}


def test_cli_model_nccl(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["model", "nccl", "--system", "8x8-h100-ndr", "--size", "1KiB", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    free = nccl_choose("all_reduce", 1024, H100_8x8)
    assert (data["algo"], data["proto"], data["time_us"]) == (free.algo, free.proto, free.time_us)
    args = ["model", "nccl", "--world-size", "16", "--nodes", "2", "--link", "nvlink3"]
    args += ["--inter-link", "ib-hdr-200", "--arch", "ampere", "--size", "64MiB"]
    assert main([*args, "--algo", "Ring", "--proto", "^LL128"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[1].startswith("Ring/Simple:") and "LL128" not in out.split("\n\n")[1]
    assert main(["model", "nccl", "--system", "dgx"]) == 2
    assert capsys.readouterr().err.startswith("error: --system='dgx' is not valid")
    assert main(["model", "allreduce", "--world-size", "8", "--json"]) == 0  # --algo still ring
    assert json.loads(capsys.readouterr().out)["algo"] == "ring"


def test_options_that_say_what_the_system_preset_says_are_accepted(capsys) -> None:
    base = ["model", "nccl", "--system", "2x8-a100-hdr", "--size", "1MiB", "--json"]
    assert main(base) == 0
    alone = json.loads(capsys.readouterr().out)
    same = ["--world-size", "16", "--nodes", "2", "--link", "nvlink3", "--inter-link", "ib-hdr-200"]
    assert main([*base, *same, "--arch", "ampere"]) == 0, capsys.readouterr().err
    assert json.loads(capsys.readouterr().out) == alone
    assert main([*base, "--world-size", "8", "--arch", "hopper"]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith(
            "error: --world-size=8 is not valid: expected no value or 16:"
            " --system='2x8-a100-hdr' sets it (2 nodes x 8 ranks"
        )
        and "; --arch='hopper' is not valid: expected no value or 'ampere'" in err
    ), err


def test_without_a_system_the_defaults_are_one_node_of_8_h100(capsys) -> None:
    assert main(["model", "nccl", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    topo = Topology(1, 8, LINKS["nvlink4-h100"], LINKS["ib-ndr-400"], nics_per_node=8)
    free = nccl_choose("all_reduce", 1 << 20, NcclSystem(topo, "hopper"))
    assert (data["collective"], data["time_us"]) == ("all_reduce", free.time_us)


def test_a_system_is_a_preset_name_or_an_ncclsystem_and_anything_else_is_named():
    by_name = nccl_choose("all_reduce", 1 << 20, "dgx-h100")
    assert by_name == nccl_choose("all_reduce", 1 << 20, NCCL_SYSTEMS["dgx-h100"])
    for bad, words in (("dgx", "one of dgx-h100"), (5, "an NcclSystem or one of")):
        with pytest.raises(ValueError, match=words) as exc:
            nccl_choose("all_reduce", 1 << 20, bad)
        assert f"system={bad!r} is not valid" in str(exc.value)


def test_the_tree_factors_are_nccl_2_30_7s():
    # tuning.cc v2.30.7-1: "busBw * .92" (Tree all-reduce), "busBw *= .85" (TREE pattern),
    # "ratio *= .5" (bus BW to algorithm BW, every algorithm but Ring, NVLS, NVLSTree)
    from edu_parallel.models.nccl import constants

    assert (constants.TREE_BW_FACTOR, constants.TREE_PATTERN_FACTOR) == (0.92, 0.85)
    assert constants.TREE_ALGBW_RATIO == 0.5
