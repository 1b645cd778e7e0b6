"""Lesson 15's interconnect presets: every bandwidth is its datasheet figure through its arithmetic,
every preset names its source, and rail-optimised fabrics and the retime table hold together."""

from __future__ import annotations

import math

import pytest

from edu_parallel.models import FABRICS, fabric, interconnect_table, rail_of, rail_optimized
from edu_parallel.models.cost import predict
from edu_parallel.models.links import ARITHMETIC, LINKS, Link
from edu_parallel.models.simulation import simulate
from edu_parallel.plans.ring import ring_allreduce_plan

# name -> (bytes/s per direction recomputed here from the datasheet figure, words its source names)
DATASHEET = {
    "nvlink3-a100": (600e9 / 2, ("A100", "600 GB/s")),
    "nvlink4-h100": (900e9 / 2, ("H100", "900 GB/s")),
    "nvlink5-b200": (1.8e12 / 2, ("B200", "1.8 TB/s")),
    "nvswitch-h100": (900e9 / 2, ("NVSwitch", "900 GB/s")),
    "pcie4-x16": (16e9 * 16 * 128 / 130 / 8, ("PCIe 4.0", "16 GT/s", "128b/130b")),
    "pcie5-x16": (32e9 * 16 * 128 / 130 / 8, ("PCIe 5.0", "32 GT/s", "128b/130b")),
    "pcie6-x16": (64e9 * 16 / 8, ("PCIe 6.0", "64 GT/s", "FLIT")),
    "ib-hdr-200": (200e9 / 8, ("ConnectX-6", "HDR 200 Gb/s")),
    "ib-ndr-400": (400e9 / 8, ("ConnectX-7", "NDR 400 Gb/s")),
    "ib-xdr-800": (800e9 / 8, ("ConnectX-8", "XDR 800 Gb/s")),
    "roce-400g": (400e9 / 8, ("400GbE", "RoCE")),
    "xgmi-mi300x": (128e9 / 2, ("MI300X", "128 GB/s", "7 links")),
    "xgmi-mi300x-gpu": (7 * 128e9 / 2, ("MI300X", "7", "896 GB/s")),
    "eth-25g": (25e9 / 8, ("25 Gb/s",)),
}


def test_every_preset_is_its_datasheet_arithmetic_and_names_its_source():
    assert set(LINKS) == set(DATASHEET) == set(ARITHMETIC)
    for name, (bw, words) in DATASHEET.items():
        link = LINKS[name]
        assert link.name == name
        assert link.bandwidth_Bps == pytest.approx(bw, rel=1e-12), name
        assert eval(ARITHMETIC[name][1]) == pytest.approx(bw, rel=1e-12), name  # noqa: S307
        for word in words:
            assert word in link.source, (name, word)
        assert 0 < link.alpha_s < 1e-4 and link.scope in ("intra-node", "inter-node")
    assert "NVLS" in LINKS["nvswitch-h100"].note
    assert "one link per peer" in LINKS["xgmi-mi300x"].note


def test_scopes_order_the_bandwidths_and_bad_scope_is_named():
    intra = [link for link in LINKS.values() if link.scope == "intra-node"]
    assert min(link.bandwidth_Bps for link in intra if "nvlink" in link.name) > max(
        LINKS[n].bandwidth_Bps for n in ("ib-xdr-800", "pcie6-x16")
    )
    with pytest.raises(ValueError, match="scope="):
        Link("x", 1e-6, 1e9, scope="rack")


def test_rail_optimised_fabric_gives_every_gpu_its_own_nic():
    topo = rail_optimized(4, 8, "nvlink4-h100", "ib-ndr-400")
    assert topo.nics_per_node == topo.gpus_per_node == 8 and topo.world_size == 32
    assert [rail_of(topo, r) for r in (0, 7, 8, 15, 31)] == [0, 7, 0, 7, 7]
    assert topo.link(3, 11) is LINKS["ib-ndr-400"] and topo.link(3, 4) is LINKS["nvlink4-h100"]
    for name, f in FABRICS.items():
        t = fabric(name, 2)
        assert t.intra is LINKS[f.intra] and t.inter is LINKS[f.inter] and f.source
        assert t.gpus_per_node == f.gpus_per_node == t.nics_per_node
    one_nic = type(topo)(2, 8, LINKS["nvlink4-h100"], LINKS["ib-ndr-400"])
    with pytest.raises(ValueError, match="rail-optimised"):
        rail_of(one_nic, 0)
    with pytest.raises(ValueError, match="name="):
        fabric("dgx-z100", 2)


def test_interconnect_table_retimes_one_trace_as_the_ring_formula():
    n, s = 8, 1 << 20
    trace = simulate(ring_allreduce_plan(n), s)[0]
    table = interconnect_table(trace, s, nodes=2)
    assert list(table.index[1 : 1 + len(LINKS)]) == list(LINKS)
    assert len(table) == 1 + len(LINKS) + len(FABRICS)
    for name, link in LINKS.items():
        row = table.loc[name]
        want = predict("ring", n, s, link)
        assert row["time (µs)"] == pytest.approx(want.time_s * 1e6, rel=1e-9), name
        assert row["busbw (GB/s)"] == pytest.approx(want.busbw_gbps, rel=1e-9), name
        assert row["GB/s each way"] == link.bandwidth_Bps / 1e9
    # a flat ring over 2 rail-optimised nodes waits on the NIC in every step: the inter link's time
    for name, f in FABRICS.items():
        row = table.loc[f"{name} (2x4)"]
        assert row["time (µs)"] == pytest.approx(table.loc[f.inter, "time (µs)"], rel=1e-9)
    assert table.loc["nvlink5-b200", "time (µs)"] < table.loc["eth-25g", "time (µs)"]
    assert math.isnan(table.loc["this machine", "GB/s each way"])
    with pytest.raises(ValueError, match="nodes="):
        interconnect_table(trace, s, nodes=3)
