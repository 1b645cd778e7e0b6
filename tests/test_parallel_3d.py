"""DP x TP x PP (x EP) executed on 8 ranks: the step equals one process, every collective ran on a
TP, DP or EP group of the mesh, and the bytes each rank sends per group equal the planner's."""

from __future__ import annotations

import json

import pytest
import torch
from helpers import checked_names, cli, count_checks, english_phrases, no_process_cluster

from edu_parallel import Cluster
from edu_parallel.app.cli import main
from edu_parallel.core.dims import ParallelDims
from edu_parallel.core.i18n import language
from edu_parallel.core.width import width
from edu_parallel.parallel_3d import LAYOUTS, measure_3d, run_3d
from edu_parallel.parallel_3d.config import ITEMSIZE, Config3D, Run3D
from edu_parallel.parallel_3d.model import adam_step, layer_weights, reference_step
from edu_parallel.parallel_3d.report import _compare, format_3d, grad_tolerance, update_tolerance
from edu_parallel.parallel_3d.step import step_job

JSON_KEYS = {
    "matches_reference",
    "per_rank_sent_bytes_by_group",
    "per_rank_model_state_bytes",
    "per_rank_activation_bytes",
    "bubble_fraction_measured",
}


# ---------------------------------------------------------------- checked before any process
def test_bad_degrees_and_sizes_are_named_at_once() -> None:
    with pytest.raises(ValueError) as err:
        Run3D.build(8, dp=2, tp=3, pp=8, layers=4, heads=4, hidden=16)
    text = str(err.value)
    assert "tp=3 is not valid: expected a divisor of world_size=8" in text
    assert "tp=3 is not valid: expected a divisor of heads=4" in text
    assert "pp=8 is not valid: expected at most layers=4" in text
    cases = [
        (dict(dp=4, tp=2, pp=2), "dp * tp * pp = 4 * 2 * 2 = 16 is not valid"),
        (dict(dp=2, tp=2, pp=2, batch=12), "batch=12 is not valid: expected a multiple of"),
        (dict(dp=2, tp=2, pp=2, batch=0), "batch=0 is not valid"),
        (dict(dp=2, tp=2, pp=2, batch=-4), "batch=-4 is not valid"),
        (dict(dp=2, tp=2, pp=2, zero=3), "zero=3 is not valid"),
        (dict(dp=2, tp=4, pp=1, ep=2), "ep=2 is not valid: expected 1 without experts"),
        (dict(dp=4, tp=2, pp=1, ep=8, experts=8), "ep=8 is not valid"),
        (dict(dp=2, tp=2, pp=2, heads=6), "heads=6 is not valid: expected a divisor of hidden=16"),
        (dict(dp=2, tp=2, pp=2, heads=1), "tp=2 is not valid: expected a divisor of heads=1"),
    ]
    for kwargs, message in cases:
        with pytest.raises(ValueError, match=message.replace("*", r"\*")):
            Run3D.build(8, **kwargs)
    run = Run3D.build(8, 2, 2, 2)
    dims, cfg = run.dims, run.config
    assert (dims.dp, dims.tp, dims.pp, cfg.num_microbatches(2), cfg.micro_batch(dims)) == (
        2,
        2,
        2,
        4,
        2,
    )


@pytest.mark.parametrize(
    "sizes, message",
    [
        ({"layers": 0}, "layers=0 is not valid: expected an integer in [1, 32]"),
        ({"hidden": 4096}, "hidden=4096 is not valid: expected an integer in [1, 128]"),
        ({"heads": 3}, "heads=3 is not valid: expected a divisor of hidden=16"),
        ({"batch": 0}, "batch=0 is not valid"),
        ({"seq": 1000}, "seq=1000 is not valid: expected an integer in [1, 256]"),
        ({"microbatches": 0}, "microbatches=0 is not valid"),
        ({"zero": 2}, "zero=2 is not valid: expected one of 0, 1"),
        ({"experts": 65}, "experts=65 is not valid: expected an integer in [0, 64]"),
        ({"experts": 3}, "experts=3 is not valid: expected a divisor of 4*hidden=64"),
        ({"experts": 4, "top_k": 5}, "top_k=5 is not valid: expected an integer in [1, 4]"),
        ({"experts": 4, "capacity_factor": 0}, "capacity_factor=0 is not valid"),
        ({"lr": 0}, "lr=0 is not valid"),
        ({"seed": -1}, "seed=-1 is not valid"),
    ],
)
def test_each_bad_size_is_one_line_naming_it(sizes, message) -> None:
    with pytest.raises(ValueError) as err:
        Config3D(**sizes)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_every_bad_size_is_named_at_once_and_the_run_holds_dims_of_its_model() -> None:
    with pytest.raises(ValueError) as err:
        Config3D(layers=0, heads=0, lr=-1)
    assert [part.split("=")[0] for part in str(err.value).split("; ")] == ["layers", "heads", "lr"]
    cfg = Config3D()
    other = Config3D(heads=8).dims(8, 2, 2, 2)
    with pytest.raises(ValueError, match=r"dims=ParallelDims\(.*\) is not valid: expected degrees"):
        Run3D(other, cfg)  # degrees checked against another model's heads
    run = Run3D(cfg.dims(8, 2, 2, 2), cfg)
    assert run.dims.heads == cfg.heads and Config3D(lr=1).lr == 1.0


def test_run_3d_checks_tp_once_from_the_command_line_to_the_ranks(monkeypatch) -> None:
    """``--tp`` is checked by the one ParallelDims the CLI builds with the model's shape; the
    cluster runs on those dims and the rank job receives the Run3D that holds them. No
    process starts: the cluster records what it is asked to run."""
    records = no_process_cluster(monkeypatch)
    dims_built = count_checks(monkeypatch, ParallelDims)
    runs_built = count_checks(monkeypatch, Run3D)
    names = checked_names(monkeypatch)
    assert main(["run", "3d", "--dp", "2", "--tp", "2", "--pp", "2"]) == 0
    assert names.count("tp") == 1 and names.count("world_size") == 1
    assert len(dims_built) == 1 and len(runs_built) == 1
    ((cluster, fn, (run,)),) = records
    assert fn is step_job and run is runs_built[0] and run.dims is dims_built[0] is cluster.dims
    assert (run.dims.dp, run.dims.tp, run.dims.pp, run.dims.heads) == (2, 2, 2, 4)
    assert run_3d(cluster, dp=2, tp=2, pp=2) is None  # the Python entry checks it once more
    assert names.count("tp") == 2 and len(dims_built) == 2 and records[-1][2][0].dims.tp == 2


# ---------------------------------------------------------------- the optimizer, one process
def test_the_written_out_adam_is_torchs_first_step() -> None:
    """Ranks and reference step Adam with :func:`adam_step` (no ``torch.optim``: it imports
    ``torch._dynamo``); it must be ``torch.optim.Adam``'s first step, to the bit."""
    g = torch.Generator().manual_seed(3)
    mine = [torch.randn(shape, generator=g).requires_grad_(True) for shape in ((4, 16), (7,))]
    theirs = [t.detach().clone().requires_grad_(True) for t in mine]
    for a, b in zip(mine, theirs, strict=True):
        a.grad = torch.randn(a.shape, generator=g)
        b.grad = a.grad.clone()
    adam_step(mine, lr=1e-2)
    torch.optim.Adam(theirs, lr=1e-2, foreach=False).step()
    assert all(torch.equal(a, b) for a, b in zip(mine, theirs, strict=True))
    assert not torch.equal(mine[0], theirs[0].grad)  # it moved the parameters


def test_the_reference_step_updates_as_torch_adam_does() -> None:
    """The one-process reference: its update of a weight is ``torch.optim.Adam``'s from its
    gradient."""
    cfg = Config3D(layers=2, hidden=8, heads=2, batch=4)
    ref = reference_step(cfg)
    for i, name in ((0, "wq"), (1, "w2")):
        p = layer_weights(cfg)[i][name].clone().requires_grad_(True)
        p.grad = ref["grads"][f"layer{i}.{name}"].clone()
        torch.optim.Adam([p], lr=cfg.lr, foreach=False).step()
        assert torch.equal(p.detach(), ref["updated"][f"layer{i}.{name}"])


# ---------------------------------------------------------------- the runs
@pytest.fixture(scope="module")
def reports():
    out = {}
    with Cluster(8, timeout=60) as c:
        for dp, tp, pp, ep in LAYOUTS:
            extra = {"experts": 4} if ep > 1 else {}
            out[(dp, tp, pp, ep, 0)] = run_3d(c, dp, tp, pp, ep, **extra)
        out[(2, 2, 2, 1, 1)] = run_3d(c, 2, 2, 2, zero=1)
        out[(4, 2, 1, 2, 1)] = run_3d(c, 4, 2, 1, 2, experts=4, zero=1)
        out["mesh"] = c.run(_device_mesh_groups, (2, 2, 2)).results
    return out


def _device_mesh_groups(ctx, shape):
    from torch.distributed import get_process_group_ranks
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh("cpu", shape, mesh_dim_names=("pp", "dp", "tp"))
    return {d: get_process_group_ranks(mesh.get_group(d)) for d in ("pp", "dp", "tp")}


@pytest.mark.multiprocess
def test_every_layout_equals_one_process(reports) -> None:
    runs = [r for k, r in reports.items() if k != "mesh"]
    assert len(runs) == len(LAYOUTS) + 2
    for rep in runs:
        assert rep.matches_reference, (rep.layout, rep.max_abs_error)
        assert rep.max_abs_error < 1e-5
        assert rep.loss == pytest.approx(rep.reference_loss, rel=1e-5)
        assert rep.matches_builtin


@pytest.mark.multiprocess
def test_a_planted_wrong_gradient_or_update_is_caught(reports) -> None:
    rep = reports[(2, 2, 2, 1, 0)]
    ref = reference_step(rep.config)
    results = [
        {
            "coords": rep.dims.coords(r),
            "grads": {n: (i, ref["grads"][n][tuple(slice(a, b) for a, b in i)] / 2) for n, i in h},
            "updated": {n: (i, ref["updated"][n][tuple(slice(a, b) for a, b in i)]) for n, i in h},
        }
        for r, h in enumerate(_holdings(rep))
    ]
    lr = rep.config.lr
    assert _compare(results, ref, rep.dims, lr)[0]  # halves summed over dp=2: the full gradient
    name, (index, g) = next(iter(results[3]["grads"].items()))
    results[3]["grads"][name] = (index, g + 1e-3)
    assert not _compare(results, ref, rep.dims, lr)[0]
    results[3]["grads"][name] = (index, g)
    name, (index, t) = next(iter(results[3]["updated"].items()))
    at = tuple(slice(a, b) for a, b in index)
    large = ref["grads"][name][at].abs() > 1e-3  # Adam moved these by lr, to within 2 lr RTOL
    assert large.any()
    results[3]["updated"][name] = (index, t + large * 1e-2 * lr)
    assert not _compare(results, ref, rep.dims, lr)[0]


def test_an_update_may_differ_where_adam_divides_a_rounded_gradient_by_its_size() -> None:
    """Adam's first step is lr g / (|g| + eps): where |g| is within rounding of zero, a gradient
    summed in another order can flip the sign (32 float32 layers on 16 ranks: 2.6e-3 at lr
    1e-2, while every gradient agreed within 4.8e-7); where |g| is large the room is 2 lr RTOL."""
    grad = torch.tensor([0.0, 1e-9, 1.0, -3.0])
    room = update_tolerance(grad, lr=1e-2)
    assert room[0] == pytest.approx(2e-2) and room[1] == pytest.approx(2e-2)
    assert room[2] == pytest.approx(2e-2 * (1e-6 + 3e-4) / (1 + 1e-8))  # RTOL of max |g| = 3
    assert room[3] < 3e-6


def test_a_gradient_may_carry_its_tensors_rounding_but_not_a_missing_microbatch() -> None:
    want = torch.tensor([1.0, -0.5, 0.0])
    room = grad_tolerance(want)
    assert float(room) == pytest.approx(1e-6 + 1e-4)
    assert ((want + torch.tensor([0.0, 0.0, 2.9e-6]) - want).abs() <= room).all()  # rounding
    assert not ((want * (1 - 1 / 256) - want).abs() <= room).all()  # one of 256 microbatches


def _holdings(rep):
    """Per rank the (tensor, index) pairs its trace says it holds."""
    out = [[] for _ in range(rep.dims.world_size)]
    for e in rep.trace.events:
        if e.kind == "mark" and e.op == "holds":
            out[e.rank].append((e.attrs["tensor"], e.attrs["index"]))
    return out


@pytest.mark.multiprocess
def test_bytes_per_rank_and_group_equal_the_planner(reports) -> None:
    for key, rep in reports.items():
        if key == "mesh" or rep.config.experts:
            continue
        assert rep.predicted_bytes_by_group is not None and rep.matches_planner, rep.layout
        for row, pred in zip(rep.rows, rep.predicted_bytes_by_group, strict=True):
            for k in ("tp", "pp", "dp"):
                assert row["sent_bytes_by_group"][k] == pytest.approx(pred[k], abs=0.5)
        d = rep.dims
        sent = [r["sent_bytes_by_group"] for r in rep.rows]
        assert all((s["tp"] > 0) == (d.tp > 1) for s in sent)
        assert all((s["dp"] > 0) == (d.dp > 1) for s in sent)
        assert all((s["pp"] > 0) == (d.pp > 1) and s["ep"] == 0 for s in sent)


@pytest.mark.multiprocess
def test_collectives_ran_on_the_groups_of_the_mesh(reports) -> None:
    rep = reports[(4, 2, 1, 2, 0)]
    d = rep.dims
    tp, dp, edp = (set(map(tuple, d.groups(k))) for k in ("tp", "dp", "edp"))
    ep = set(map(tuple, d.groups("ep")))
    seen = {"all_reduce": set(), "all_to_all_single": set()}
    for e in rep.trace.events:
        if e.kind == "collective":
            group = tuple(e.attrs["group"])
            assert group in tp | dp | edp | ep, (e.op, group)
            seen.setdefault(e.op, set()).add(group)
    assert seen["all_to_all_single"] == ep  # tokens travel inside the EP blocks only
    assert seen["all_reduce"] == tp | dp | edp  # f/g in TP, dense grads in DP, experts in EDP
    assert all(r["sent_bytes_by_group"]["ep"] > 0 for r in rep.rows)
    # the same trace with a collective moved onto a group the mesh does not have is named
    bad = next(e for e in rep.trace.events if e.kind == "collective" and e.op == "all_reduce")
    original = bad.attrs["group"]
    bad.attrs["group"] = [0, 7]
    try:
        with pytest.raises(ValueError, match=r"on ranks \[0, 7\], not a TP or DP group"):
            measure_3d(rep.trace, d)
    finally:
        bad.attrs["group"] = original


@pytest.mark.multiprocess
def test_the_mesh_is_torchs_device_mesh(reports) -> None:
    dims = ParallelDims(8, tp=2, pp=2)
    for rank, groups in enumerate(reports["mesh"]):
        for dim, ranks in groups.items():
            assert ranks in dims.groups(dim), (rank, dim)
            assert rank in ranks


@pytest.mark.multiprocess
def test_memory_per_rank_follows_the_layout(reports) -> None:
    for key, rep in reports.items():
        if key == "mesh" or rep.config.experts:
            continue
        d, h, L = rep.dims, rep.config.hidden, rep.config.layers
        params = 12 * h * h * L // (d.pp * d.tp) * ITEMSIZE  # 12 h^2 per layer, split t and p ways
        for row in rep.rows:
            assert row["param_bytes"] == params and row["grad_bytes"] == params
            share = 1 if rep.config.zero == 0 or d.dp == 1 else d.dp
            assert row["optimizer_bytes"] == 2 * params // share  # Adam's m and v
            assert row["activation_bytes"] > 0
    one, zero1 = reports[(2, 2, 2, 1, 0)], reports[(2, 2, 2, 1, 1)]
    assert [r["activation_bytes"] for r in one.rows] == [r["activation_bytes"] for r in zero1.rows]
    # 1F1B: the first stage holds more microbatches in flight than the last
    first = [r["activation_bytes"] for r in one.rows if r["pp"] == 0]
    last = [r["activation_bytes"] for r in one.rows if r["pp"] == 1]
    assert min(first) > max(last)


@pytest.mark.multiprocess
def test_the_json_report_has_the_issue_keys(reports) -> None:
    data = json.loads(json.dumps(reports[(2, 2, 2, 1, 0)].to_json_dict()))
    assert JSON_KEYS <= set(data)
    assert data["matches_reference"] is True and data["matches_planner"] is True
    assert len(data["per_rank_sent_bytes_by_group"]) == 8
    assert 0.0 <= data["bubble_fraction_measured"] < 1.0


@pytest.mark.multiprocess
def test_cli_runs_3d_and_names_bad_degrees() -> None:
    out = cli("run", "3d", "--dp", "2", "--tp", "2", "--pp", "2", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert JSON_KEYS <= set(data) and data["matches_reference"] and data["matches_planner"]
    bad = cli("run", "3d", "--dp", "2", "--tp", "3", "--pp", "2", "--heads", "4")
    assert bad.returncode == 2
    line = bad.stderr.strip()
    assert "\n" not in line and "Traceback" not in line
    assert "tp=3 is not valid: expected a divisor of heads=4" in line


@pytest.mark.multiprocess
def test_the_rank_table_reads_in_chinese_with_its_columns_aligned(reports) -> None:
    """``run 3d``'s table: its header in the learner's language, as wide as every rank's row."""
    report = reports[(4, 2, 1, 2, 1)]  # EP too: four byte columns
    texts = {}
    for lang in ("en", "zh"):
        with language(lang):
            texts[lang] = format_3d(report)
    for lang, head in (("en", "model state"), ("zh", "模型状态")):
        lines = texts[lang].splitlines()
        start = next(i for i, line in enumerate(lines) if line.startswith("rank") and head in line)
        table = lines[start : start + 9]  # the header and the 8 ranks
        assert {width(line) for line in table} == {width(table[0])}, texts[lang]
    assert "EP 发送" in texts["zh"] and "空闲" in texts["zh"]
    symbols = ("rank pp dp tp",)  # the mesh coordinates' names, as torch's DeviceMesh has them
    assert not english_phrases(texts["zh"], allow=symbols), english_phrases(texts["zh"])
