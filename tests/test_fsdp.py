"""PyTorch FSDP2 (fully_shard) on gloo ranks against ZeRO-3: params, collective sequence, bytes,
picture.

Zhao et al. 2023, "PyTorch FSDP" (arXiv 2304.11277); the PyTorch ``fully_shard`` API docs.
"""

from __future__ import annotations

import json
import sys
import types

import pytest
from helpers import Recorder, count_checks, fresh_python

from edu_parallel.app.cli import build_parser
from edu_parallel.app.concepts.registry import CONCEPTS
from edu_parallel.core.dims import ParallelDims
from edu_parallel.core.trace import Trace
from edu_parallel.memory.communication import fsdp_collectives_per_step
from edu_parallel.task.mlp import num_params
from edu_parallel.zero.config import FsdpConfig, ZeroConfig
from edu_parallel.zero.fsdp import FsdpUnavailableError, fsdp_job, preload, require_fsdp2
from edu_parallel.zero.fsdp_report import (
    format_fsdp,
    formula_sent_bytes,
    fsdp_padded_numel,
    run_fsdp,
    run_fsdp_config,
)
from edu_parallel.zero.stages import zero_job
from edu_parallel.zero.tables import fsdp_table

# FSDP2 is ``torch.distributed.fsdp.fully_shard`` from torch 2.6 on; the package supports torch >=
# 2.4.
FSDP = pytest.importorskip("torch.distributed.fsdp")
needs_fsdp2 = pytest.mark.skipif(not hasattr(FSDP, "fully_shard"), reason="torch < 2.6: no FSDP2")

preload()  # FSDP2's imports once here, before the cluster fixture forks: not once per rank

DIMS = (16, 16, 16, 16)
PSI = num_params(DIMS)  # 816
UNIT = 2 * (16 * 16 + 16)  # bf16 bytes of one Linear(16, 16) unit, all-gathered: 544


def sequence(report, step=1):
    return [
        (r["pass"], r["op"].rsplit("_single", 1)[0], r["unit"], r["prefetch"])
        for r in report.collectives["fsdp"]
        if r["step"] == step
    ]


@pytest.fixture(scope="module")
def layer(cluster2):
    return run_fsdp(cluster2, steps=2)


@needs_fsdp2
def test_layer_units_match_zero3_and_reference(layer) -> None:
    r = layer
    assert r.matches_zero3 and r.matches_reference, format_fsdp(r)
    # 2 ranks: the bf16 sum a + b has one rounding and /2 is exact, whoever does it: bit for bit
    assert r.max_abs_diff_zero3 == 0.0 and r.max_abs_diff_reference == 0.0
    assert r.units == ["0", "2", "4", "root"]
    assert r.losses == r.zero3_losses


@needs_fsdp2
def test_layer_sequence_prefetches_in_backward(layer) -> None:
    # Forward: each unit all-gathered just before its forward. Backward, in reverse: unit 4 is
    # gathered again (it was resharded after forward), and FSDP2 prefetches the NEXT unit's
    # all-gather (2, then 0) before it reduce-scatters the current unit's gradients. The root
    # holds no parameters (all are in the Linear units): it issues nothing. Adam: no collective.
    expected = [
        ("forward", "all_gather", "0", False),
        ("forward", "all_gather", "2", False),
        ("forward", "all_gather", "4", False),
        ("backward", "all_gather", "4", False),
        ("backward", "all_gather", "2", True),
        ("backward", "reduce_scatter", "4", False),
        ("backward", "all_gather", "0", True),
        ("backward", "reduce_scatter", "2", False),
        ("backward", "reduce_scatter", "0", False),
    ]
    assert sequence(layer, 1) == sequence(layer, 2) == expected
    zero3 = [(r["pass"], r["op"]) for r in layer.collectives["zero3"] if r["step"] == 1]
    assert [p for p, _ in zero3] == ["forward", "backward", "reduce_grads"]
    assert [
        op.startswith(x)
        for (_, op), x in zip(zero3, ("all_gather",) * 2 + ("reduce_scatter",), strict=True)
    ] == [True] * 3
    assert layer.collectives_per_step == {"fsdp": 9, "zero3": 3}
    assert layer.collectives_per_step["fsdp"] == fsdp_collectives_per_step(
        len(layer.units) - 1
    )  # root: none
    events = layer.trace.select("collective")
    assert {e.attrs["dtype"] for e in events} == {"c10::BFloat16"}  # the mixed-precision policy
    for e in events:  # all-gather output = N x its input shard; reduce-scatter output = input / N
        out_in = (
            (e.nbytes, 2 * e.attrs["input_nbytes"])
            if e.op.startswith("all_gather")
            else (2 * e.nbytes, e.attrs["input_nbytes"])
        )
        assert out_in[0] == out_in[1] == UNIT


@needs_fsdp2
def test_layer_bytes_and_peak(layer) -> None:
    n, dp = 2, 2 * (2 - 1) / 2 * 2 * PSI
    assert layer.dp_sent_bytes_per_step == dp
    # per unit: all-gather forward, all-gather backward, reduce-scatter: 3 x (N-1)/N x 2 P
    assert layer.formula_sent_bytes == formula_sent_bytes(DIMS, n, 2) == 1.5 * dp
    assert layer.per_rank_sent_bytes == [layer.formula_sent_bytes] * n
    assert layer.zero3_per_rank_sent_bytes == [1.5 * dp] * n
    assert layer.comm_ratio_vs_dp == layer.zero3_comm_ratio_vs_dp == pytest.approx(1.5)
    # unsharded bf16 params alive at once: the current unit + the prefetched one, vs whole model
    assert layer.per_rank_peak_gathered_bytes == [2 * UNIT] * n
    assert layer.zero3_per_rank_peak_gathered_bytes == [2 * PSI] * n
    mem = layer.trace.select("memory")
    assert sum(e.nbytes for e in mem) == 0  # every gather was resharded


@needs_fsdp2
def test_granularity_and_reshard_after_forward(cluster2) -> None:
    model = run_fsdp(cluster2, steps=1, granularity="model")
    assert model.units == ["root"] and model.matches_zero3 and model.max_abs_diff_zero3 == 0.0
    assert sequence(model) == [
        ("forward", "all_gather", "root", False),
        ("backward", "all_gather", "root", False),
        ("backward", "reduce_scatter", "root", False),
    ]
    assert model.collectives_per_step["fsdp"] == 3 < 9  # fewer, larger collectives
    assert model.collectives_per_step["fsdp"] == fsdp_collectives_per_step(1)
    assert model.comm_ratio_vs_dp == pytest.approx(1.5)
    assert model.per_rank_peak_gathered_bytes == [2 * PSI] * 2  # the largest unit: everything
    # None = torch's default: reshard after forward except the ROOT, which keeps its params
    # for backward: no second all-gather, DP's volume.
    kept = run_fsdp(cluster2, steps=1, granularity="model", reshard_after_forward=None)
    assert [s[:2] for s in sequence(kept)] == [
        ("forward", "all_gather"),
        ("backward", "reduce_scatter"),
    ]
    assert kept.comm_ratio_vs_dp == pytest.approx(1.0) and kept.matches_zero3
    keep_all = run_fsdp(cluster2, steps=1, reshard_after_forward=False)
    assert [s[:2] for s in sequence(keep_all)] == [("forward", "all_gather")] * 3 + [
        ("backward", "reduce_scatter")
    ] * 3
    assert keep_all.per_rank_sent_bytes == [formula_sent_bytes(DIMS, 2, 1)] * 2
    assert keep_all.collectives_per_step["fsdp"] == fsdp_collectives_per_step(3, False) == 6
    assert keep_all.per_rank_peak_gathered_bytes == [2 * PSI] * 2  # all units kept until backward


@needs_fsdp2
def test_forward_prefetch(cluster2) -> None:
    r = run_fsdp(cluster2, steps=1, forward_prefetch=True)
    fwd = [s for s in sequence(r) if s[0] == "forward"]
    assert fwd == [
        ("forward", "all_gather", "0", False),
        ("forward", "all_gather", "2", True),
        ("forward", "all_gather", "4", True),
    ]
    assert r.matches_zero3


@needs_fsdp2
def test_uneven_dim0_is_padded(cluster2) -> None:
    dims = (16, 15, 16)  # W1 (15, 16), b1 (15,): 15 rows over 2 ranks -> shards of 8 rows
    r = run_fsdp(cluster2, steps=1, dims=dims)
    psi = num_params(dims)
    assert (psi, r.zero3_padded_numel, r.fsdp_padded_numel) == (
        511,
        512,
        16 * 16 + 16 + 16 * 15 + 16,
    )
    assert r.fsdp_padded_numel == fsdp_padded_numel(dims, 2)
    assert r.per_rank_sent_bytes == [formula_sent_bytes(dims, 2, 2)] * 2
    assert r.comm_ratio_vs_dp > r.zero3_comm_ratio_vs_dp == pytest.approx(1.5, rel=1e-2)
    assert r.matches_zero3 and r.max_abs_diff_zero3 == 0.0


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"steps": 0}, ["steps=0", "[1, 1000]"]),
        ({"lr": -1}, ["lr=-1", "> 0"]),
        ({"granularity": "block"}, ["granularity='block'", "'layer', 'model'"]),
        ({"reshard_after_forward": "yes"}, ["reshard_after_forward='yes'", "True, False or None"]),
        (
            {"granularity": "model", "forward_prefetch": True},
            ["forward_prefetch=True", "granularity='layer'"],
        ),
        ({"dims": (16,)}, ["dims=(16,)", "at least 2"]),
    ],
)
def test_bad_arguments_name_parameter_value_and_range(kwargs, words) -> None:
    with pytest.raises(ValueError) as info:
        run_fsdp(Recorder(2), **kwargs)  # checked before any job starts
    text = str(info.value)
    assert all(w in text for w in words) and "\n" not in text, text
    assert text.startswith(words[0] + " is not valid") and text.count("is not valid") == 1


def test_every_bad_value_is_named_at_once_and_zero3_shares_the_checks() -> None:
    with pytest.raises(ValueError) as info:
        FsdpConfig(2, steps=0, granularity="block", reshard_after_forward=1, dims=(16,))
    text = str(info.value)
    assert "\n" not in text and text.count("is not valid") == 4, text
    for name in ("steps=0", "granularity='block'", "reshard_after_forward=1", "dims=(16,)"):
        assert name in text
    config = FsdpConfig(2, steps=3, dims=[16, 15, 16])  # the ZeRO-3 run is built with it, once
    assert config.zero3 == ZeroConfig(2, 3, steps=3, dims=(16, 15, 16))
    assert config.dims == (16, 15, 16) and config.gathers_per_step == 2
    assert FsdpConfig(2, reshard_after_forward=False).gathers_per_step == 1
    assert FsdpConfig(2, granularity="model", reshard_after_forward=None).gathers_per_step == 1


def test_no_fsdp2_is_a_clear_error(monkeypatch) -> None:
    monkeypatch.setitem(
        sys.modules, "torch.distributed.fsdp", types.ModuleType("torch.distributed.fsdp")
    )
    with pytest.raises(FsdpUnavailableError, match=r"fully_shard \(torch >= 2.6\)"):
        require_fsdp2()
    executor = Recorder(2)
    with pytest.raises(FsdpUnavailableError):
        run_fsdp(executor)
    assert executor.calls == []  # said before any job starts


def test_the_cli_checks_once_and_the_rank_jobs_get_that_config(monkeypatch) -> None:
    """FSDP2's job gets the config the concept's check returned; ZeRO-3's job its ``zero3``,
    built inside that one check."""
    fsdp, zero3 = count_checks(monkeypatch, FsdpConfig), count_checks(monkeypatch, ZeroConfig)
    argv = ["run", "fsdp", "--world-size", "2", "--granularity", "model", "--steps", "3"]
    a = build_parser().parse_args([*argv, "--reshard-after-forward", "default"])
    config = CONCEPTS["fsdp"].check(a, ParallelDims.local(2))
    assert (config.granularity, config.reshard_after_forward, config.steps) == ("model", None, 3)
    assert fsdp == [config] and zero3 == [config.zero3]
    executor = Recorder(2)
    assert CONCEPTS["fsdp"].run(executor, config) is None
    assert executor.calls == [(fsdp_job, (config,)), (zero_job, (config.zero3, False))]
    assert executor.calls[0][1][0] is config and executor.calls[1][1][0] is config.zero3
    assert fsdp == [config] and zero3 == [config.zero3]  # nothing checked again


def test_bad_cli_options_are_one_line_naming_each_as_spelled() -> None:
    argv = ["run", "fsdp", "--granularity", "model", "--forward-prefetch", "--steps", "0"]
    a = build_parser().parse_args([*argv, "--reshard-after-forward", "maybe"])
    with pytest.raises(ValueError) as info:
        CONCEPTS["fsdp"].check(a, ParallelDims.local(2))
    text = str(info.value)
    assert "\n" not in text and text.count("is not valid") == 3, text
    for name in ("--reshard-after-forward='maybe'", "--forward-prefetch=True", "steps=0"):
        assert name + " is not valid" in text
    assert "reshard_after_forward" not in text


def test_a_given_config_must_fit_the_executor() -> None:
    with pytest.raises(ValueError, match="config.world_size=4 is not valid: expected 2"):
        run_fsdp_config(Recorder(2), FsdpConfig(4))


@needs_fsdp2
def test_sequence_picture_and_table_from_json(layer) -> None:
    from edu_parallel.viz.fsdp import (
        BAND_LINE_PX,
        collective_sequence,
        comparison_rows,
        sequence_points,
    )

    data = json.loads(json.dumps(layer.to_json_dict()))  # what the CLI prints
    assert data["concept"] == "fsdp" and data["matches_zero3"] is True
    pts = sequence_points(data, step=1)
    assert [p.unit for p in pts["fsdp"]][:3] == ["model[0]", "model[2]", "model[4]"]
    assert [p.unit for p in pts["zero3"]] == ["whole model"] * 3
    fig = collective_sequence(data)
    drawn = {(t.xaxis, t.name): len(t.x) for t in fig.data}
    assert drawn == {
        ("x", "all_gather"): 2,
        ("x", "reduce_scatter"): 1,
        ("x2", "all_gather"): 6,
        ("x2", "reduce_scatter"): 3,
    }
    gathers = next(t for t in fig.data if t.xaxis == "x2" and t.name == "all_gather")
    assert sum(w > 0 for w in gathers.marker.line.width) == 2  # the two backward prefetches
    assert {a.text for a in fig.layout.annotations} >= {"forward", "backward", "reduce_grads"}
    # the passes are named above the panel (not on its top row of markers), every other one a
    # line higher (a narrow pass's name ran into the next), the panels' titles above both lines
    passes = [
        a for a in fig.layout.annotations if a.text in ("forward", "backward", "reduce_grads")
    ]
    assert {a.yanchor for a in passes} == {"bottom"} and all(a.y == 1 for a in passes)
    assert [a.yshift or 0 for a in passes[:3]] == [0, BAND_LINE_PX, 0]
    assert all(a.yshift > 2 * BAND_LINE_PX for a in fig.layout.annotations[:2])
    rows = comparison_rows({"FSDP per layer": data})
    assert [r["collectives_per_step"] for r in rows] == [3, 9]
    assert rows[0]["peak_gathered"] == 2 * PSI and rows[1]["peak_gathered"] == 2 * UNIT
    with pytest.raises(ValueError, match="step=7"):
        sequence_points(data, step=7)
    assert Trace.from_json(layer.trace.to_json()).select("collective")  # the trace round-trips


def test_renderer_never_imports_torch() -> None:
    fresh_python("import edu_parallel.viz.fsdp")


@needs_fsdp2
def test_cli_json(capsys) -> None:
    from edu_parallel.app.cli import main

    assert (
        main(
            ["run", "fsdp", "--world-size", "2", "--steps", "1", "--granularity", "model", "--json"]
        )
        == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert data["matches_zero3"] is True and data["collectives_per_step"] == {"fsdp": 3, "zero3": 3}
    assert data["per_rank_sent_bytes"] == [formula_sent_bytes(DIMS, 2, 2)] * 2
    assert main(["run", "fsdp", "--reshard-after-forward", "maybe"]) == 2
    assert "--reshard-after-forward='maybe' is not valid" in capsys.readouterr().err


def test_collective_count_formula_rejects_bad_input() -> None:
    assert fsdp_collectives_per_step(4) == 12 and fsdp_collectives_per_step(4, False) == 8
    with pytest.raises(ValueError, match="units=0"):
        fsdp_collectives_per_step(0)
    with pytest.raises(ValueError, match="reshard_after_forward='yes'"):
        fsdp_collectives_per_step(2, "yes")  # type: ignore[arg-type]


@needs_fsdp2
def test_gathered_memory_curves_replay_the_ledger(cluster2) -> None:
    from edu_parallel.viz.fsdp import gathered_curves, gathered_memory_figure

    r = run_fsdp(cluster2, steps=1)
    curves = gathered_curves({"ZeRO-3": r.zero3_trace, "FSDP": r.trace})
    assert max(b for _, b in curves["FSDP"]) == r.per_rank_peak_gathered_bytes[0]
    assert max(b for _, b in curves["ZeRO-3"]) == r.zero3_per_rank_peak_gathered_bytes[0]
    assert curves["FSDP"][-1][1] == 0 == curves["ZeRO-3"][-1][1]  # everything resharded
    assert len(curves["FSDP"]) == 1 + 4 * 3  # per unit: gather + release, forward and backward
    fig = gathered_memory_figure({"ZeRO-3": r.zero3_trace, "FSDP": r.trace})
    assert [t.name for t in fig.data] == ["ZeRO-3", "FSDP"]
    assert list(fig.data[1].y) == [b for _, b in curves["FSDP"]]
    with pytest.raises(ValueError, match="no gathered_params"):
        gathered_curves({"empty": Trace(meta={})})


def test_fsdp_table_puts_zero3_first_then_each_run(layer) -> None:
    table = fsdp_table({"per layer": layer})
    assert list(table.index) == ["ZeRO-3", "per layer"]
    z, f = table.loc["ZeRO-3"], table.loc["per layer"]
    assert z["collectives per step"] == layer.collectives_per_step["zero3"]
    assert z["sent per rank per step (B)"] == max(layer.zero3_per_rank_sent_bytes)
    assert z["vs DP"] == layer.zero3_comm_ratio_vs_dp
    assert z["peak gathered (B)"] == max(layer.zero3_per_rank_peak_gathered_bytes)
    assert f["params = ZeRO-3"] == layer.matches_zero3
    assert f["collectives per step"] == layer.collectives_per_step["fsdp"]
    assert f["sent per rank per step (B)"] == max(layer.per_rank_sent_bytes)
    assert f["peak gathered (B)"] == max(layer.per_rank_peak_gathered_bytes) == 2 * UNIT
    with pytest.raises(ValueError, match="reports="):
        fsdp_table({})


@needs_fsdp2
def test_fsdp_report_in_chinese_with_its_table_aligned(layer) -> None:
    from helpers import english_phrases

    from edu_parallel.core.i18n import language
    from edu_parallel.core.width import width

    texts = {}
    for lang in ("en", "zh"):
        with language(lang):
            texts[lang] = format_fsdp(layer)
        lines = texts[lang].splitlines()
        head = next(i for i, line in enumerate(lines) if line.startswith(" " * 8))
        table = lines[head : head + 3]  # the header, the ZeRO-3 row and the FSDP row
        assert table[1].startswith("ZeRO-3") and table[2].startswith("FSDP"), table
        assert len({width(line) for line in table}) == 1, "\n".join(table)
    assert "collectives/step" in texts["en"] and english_phrases(texts["en"])
    assert "每步集合通信数" in texts["zh"] and "聚合峰值" in texts["zh"]
    assert not english_phrases(texts["zh"]), english_phrases(texts["zh"])
