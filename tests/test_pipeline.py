"""Pipeline schedules on real ranks: gradients equal one process's, the bubble is the formula's,
1F1B bounds the stash (ERRATA E2: O(M) -> O(P)), the trace shows every F/B/W and matched sends."""

import json
import re
from collections import Counter

import pytest
import torch
from helpers import Recorder, checked_names, count_checks, no_process_cluster
from wcwidth import wcswidth

from edu_parallel.app.cli import main
from edu_parallel.core.dims import ParallelDims
from edu_parallel.core.i18n import language
from edu_parallel.core.width import MAX_TEXT_COLUMNS
from edu_parallel.pipeline_parallel.builders import MAX_MICROBATCHES, build_schedule
from edu_parallel.pipeline_parallel.config import PipelineConfig
from edu_parallel.pipeline_parallel.execute import pipeline_job
from edu_parallel.pipeline_parallel.model import (
    make_batch,
    microbatch_loss,
    reference_grads,
    stage_bounds,
)
from edu_parallel.pipeline_parallel.report import format_pipeline, run_pipeline
from edu_parallel.pipeline_parallel.schedule import Schedule
from edu_parallel.pipeline_parallel.tables import bubble_table, comm_table
from edu_parallel.pipeline_parallel.timing import (
    gpipe_bubble,
    interleaved_bubble,
    megatron_bubble,
    time_schedule,
)

pytestmark = pytest.mark.multiprocess

CASES = [  # (fixture, schedule, P, M, v): every schedule on 2 and on 4 ranks
    ("cluster2", "gpipe", 2, 4, 1),
    ("cluster2", "1f1b", 2, 4, 1),
    ("cluster2", "interleaved", 2, 4, 2),
    ("cluster2", "zb-h1", 2, 4, 1),
    ("cluster2", "interleaved", 2, 2, 2),  # M == P: the current warm-up rule (torch 2.13)
    ("cluster4", "gpipe", 4, 4, 1),
    ("cluster4", "1f1b", 4, 8, 1),
    ("cluster4", "interleaved", 4, 8, 2),
    ("cluster4", "zb-h1", 4, 8, 1),
]


@pytest.mark.parametrize("fixture,name,p,m,v", CASES)
def test_every_schedule_matches_the_single_process_reference(request, fixture, name, p, m, v):
    cluster = request.getfixturevalue(fixture)
    t_w = 1.0 if name == "zb-h1" else 0.0
    report = run_pipeline(cluster, name, p, m, v, t_b=1.0 if t_w else 2.0, t_w=t_w)
    assert report.matches_reference and report.max_abs_err < 1e-12
    assert report.follows_schedule  # the ranks ran exactly their rows, idle slots dropped
    trace, stages = report.trace, p * v
    computes = Counter(
        (e.op, e.attrs["stage"], e.attrs["microbatch"]) for e in trace.select("compute")
    )
    kinds = ("F", "I", "W") if name == "zb-h1" else ("F", "B")  # torch's names
    assert computes == Counter((k, s, mb) for k in kinds for s in range(stages) for mb in range(m))
    for e in trace.select("compute"):
        assert e.chunk == e.attrs["stage"] and e.rank == e.chunk % p and e.end >= e.start
    pairs = trace.matched_transfers()  # raises if a send has no recv or the other way round
    assert len(pairs) == 2 * (stages - 1) * m  # one activation and one gradient per boundary
    for send, recv in pairs:
        up = send.phase == "fwd"
        assert recv.phase == send.phase and recv.chunk == send.chunk + (1 if up else -1)
        assert send.peer == recv.rank == (send.chunk + (1 if up else -1)) % p
        assert send.nbytes == recv.nbytes == 4 * 32 * 8  # (mb, h) float64
    for r in range(p):  # every stashed activation is freed by the end
        mem = trace.select("memory", rank=r)
        assert mem and sum(e.nbytes for e in mem) == 0
        assert all(e.attrs["category"] == "activation" for e in mem)
    data = report.to_json_dict()
    json.dumps(data)
    assert data["bubble_fraction_retimed"] == pytest.approx(data["bubble_fraction_formula"])


@pytest.mark.parametrize("name", ["gpipe", "1f1b"])
@pytest.mark.parametrize("p,m", [(4, 8), (4, 4), (4, 2)])
def test_equal_times_give_exactly_the_gpipe_bubble(cluster4, name, p, m):
    report = run_pipeline(cluster4, name, p, m, t_f=1.0, t_b=1.0)
    assert report.bubble_fraction_retimed == pytest.approx((p - 1) / (m + p - 1), rel=1e-9)
    assert report.bubble_fraction_retimed == pytest.approx(gpipe_bubble(p, m), rel=1e-9)
    assert report.bubble_fraction_formula == pytest.approx(gpipe_bubble(p, m), rel=1e-9)
    assert report.bubble_relative_to_ideal_retimed == pytest.approx(megatron_bubble(p, m))
    assert report.bubble_relative_to_ideal_formula == pytest.approx((p - 1) / m, rel=1e-9)


@pytest.mark.parametrize("p,m", [(4, 8), (4, 2), (2, 4)])
def test_peak_activations_gpipe_m_and_1f1b_min_p_minus_i_m(cluster4, p, m):
    gpipe = run_pipeline(cluster4, "gpipe", p, m)
    assert gpipe.peak_activations_per_stage == [m] * p
    ofob = run_pipeline(cluster4, "1f1b", p, m)
    assert ofob.peak_activations_per_stage == [min(p - i, m) for i in range(p)]  # E2: O(M) -> O(P)
    assert ofob.peak_activations_retimed == ofob.peak_activations_per_stage
    # The bytes autograd kept follow the counts: stage 0 of GPipe holds M microbatches' worth.
    per_microbatch = gpipe.peak_activation_bytes_per_rank[0] // m
    assert per_microbatch > 0 and gpipe.peak_activation_bytes_per_rank[0] == m * per_microbatch
    assert ofob.peak_activation_bytes_per_rank[0] == min(p, m) * per_microbatch


def test_ranks_beyond_the_stages_stay_idle(cluster4):
    report = run_pipeline(cluster4, "1f1b", 2, 4)
    assert report.matches_reference and report.stages == 2
    assert {e.rank for e in report.trace.events} == {0, 1}


def test_one_stage_and_interleaved_chunks_on_one_rank(cluster2):
    report = run_pipeline(cluster2, "interleaved", 1, 3, 2)  # stage 1 follows stage 0 locally
    assert report.matches_reference and report.trace.select(["send", "recv"]) == []
    assert report.bubble_fraction_retimed == 0.0


def test_the_reference_is_the_full_batch_gradient():
    assert stage_bounds(5, 2) == [(0, 3), (3, 5)]
    assert stage_bounds(4, 4) == [(0, 1), (1, 2), (2, 3), (3, 4)]
    x, y = make_batch(4, 3, 8, seed=7)  # (M, mb, h)
    full = torch.nn.functional.mse_loss(x.reshape(12, 8), y.reshape(12, 8))
    assert sum(microbatch_loss(x[k], y[k], 4) for k in range(4)) == pytest.approx(float(full))
    a, b = reference_grads(2, 4, 8, 4, 3, seed=7), reference_grads(4, 4, 8, 4, 3, seed=7)
    assert torch.equal(
        torch.cat([g.flatten() for s in (0, 1) for g in a[s]]),
        torch.cat([g.flatten() for s in range(4) for g in b[s]]),
    )


class _NoRun:
    """A cluster that fails if a job starts: arguments must be checked before any work."""

    world_size = 4

    def run(self, *args, **kwargs):
        raise AssertionError("run_pipeline started work before validating its arguments")


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"schedule": "pipedream"}, "schedule='pipedream' is not valid: expected one of 'gpipe'"),
        ({"stages": 8}, "stages=8 is not valid: expected an integer in [1, 4]"),
        ({"stages": 0}, "stages=0 is not valid: expected an integer >= 1"),
        ({"microbatches": 0}, "microbatches=0 is not valid: expected an integer in [1, 512]"),
        ({"chunks": 0}, "chunks=0 is not valid: expected an integer >= 1"),
        ({"chunks": 2}, "chunks=2 is not valid: expected 1 for schedule='1f1b'"),
        (
            {"schedule": "interleaved", "microbatches": 6, "chunks": 2},
            "microbatches=6 is not valid: expected a multiple of stages=4",
        ),
        ({"layers": 3}, "layers=3 is not valid: expected an integer >= 4"),
        (
            {"schedule": "interleaved", "chunks": 2, "layers": 7},
            "layers=7 is not valid: expected an integer >= 8",
        ),
        ({"t_f": 0}, "t_f=0 is not valid: expected a finite number > 0"),
        ({"t_b": -1.0}, "t_b=-1.0 is not valid"),
        ({"t_w": -0.5}, "t_w=-0.5 is not valid: expected a finite number >= 0"),
        ({"hidden": 0}, "hidden=0 is not valid"),
        ({"seed": -1}, "seed=-1 is not valid"),
    ],
)
def test_bad_arguments_raise_before_any_work(kwargs, message):
    with pytest.raises(ValueError) as err:
        run_pipeline(_NoRun(), **kwargs)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_config_names_every_bad_field_at_once_and_fills_its_defaults() -> None:
    with pytest.raises(ValueError) as err:
        PipelineConfig("1f1b", 2, 0, 2, hidden=2048, microbatch_size=0, t_w=-1.0)
    names = [part.split("=")[0] for part in str(err.value).split("; ")]
    assert names == ["microbatches", "chunks", "hidden", "microbatch_size", "t_w"]
    with pytest.raises(ValueError, match=r"stages=None is not valid: expected an integer >= 1"):
        PipelineConfig()  # no stages and no world size to take them from
    zb = PipelineConfig("zb-h1", world_size=3)
    assert (zb.stages, zb.layers, zb.num_stages) == (3, 6, 3)
    assert zb.times == {"t_f": 1.0, "t_b": 1.0, "t_w": 1.0, "t_comm": 0.0}
    assert zb.plan == build_schedule("zb-h1", 3, 8)


def test_the_microbatches_are_bounded_before_the_schedule_is_built() -> None:
    """A million microbatches is refused in one line before any schedule is built (it hung);
    the largest accepted count builds its schedule, of 2 actions per microbatch per rank."""
    with pytest.raises(ValueError, match=r"^microbatches=1000000 is not valid: expected an int"):
        PipelineConfig("1f1b", 2, 1_000_000)
    top = PipelineConfig("1f1b", 2, MAX_MICROBATCHES)
    done = sum(a is not None for rank in top.plan.actions for a in rank)
    assert done == 2 * 2 * MAX_MICROBATCHES  # F and B of every microbatch on each of 2 ranks


def test_run_pipeline_checks_once_and_the_ranks_receive_that_config(monkeypatch) -> None:
    built = count_checks(monkeypatch, PipelineConfig)
    recorder = Recorder(4)
    assert run_pipeline(recorder, "interleaved", 2, 4, 2) is None  # what a non-zero rank gets
    ((fn, (config,)),) = recorder.calls
    assert fn is pipeline_job and config is built[0] and len(built) == 1
    assert config.plan == build_schedule("interleaved", 2, 4, 2) and config.layers == 8


def test_stages_are_checked_once_from_the_command_line_to_the_ranks(monkeypatch) -> None:
    """``--stages`` that sets the world size is checked once, as the run's dims (named stages
    in an error); with ``--world-size`` it is checked once, by the config, against it."""
    records = no_process_cluster(monkeypatch)
    dims_built = count_checks(monkeypatch, ParallelDims)
    configs = count_checks(monkeypatch, PipelineConfig)
    names = checked_names(monkeypatch)
    assert main(["run", "pipeline", "--stages", "2", "--microbatches", "4"]) == 0
    assert names.count("world_size") == 1 and "stages" not in names
    ((cluster, fn, (config,)),) = records
    assert fn is pipeline_job and config is configs[0] and cluster.dims is dims_built[0]
    assert config.stages == cluster.world_size == 2 and len(dims_built) == len(configs) == 1
    names.clear()
    assert main(["run", "pipeline", "--world-size", "4", "--stages", "2"]) == 0
    assert names.count("world_size") == names.count("stages") == 1
    assert records[-1][2][0].stages == 2 and records[-1][0].world_size == 4


def test_cli_json_keys_and_world_size_defaults_to_stages(capsys):
    code = main(
        [
            "run",
            "pipeline",
            "--schedule",
            "1f1b",
            "--stages",
            "2",
            "--microbatches",
            "4",
            "--t-f",
            "1",
            "--t-b",
            "1",
            "--json",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    data = json.loads(out)
    for key in (
        "schedule",
        "bubble_fraction_retimed",
        "bubble_fraction_formula",
        "peak_activations_per_stage",
        "matches_reference",
    ):
        assert key in data
    assert data["schedule_name"] == "1f1b" and data["world_size"] == 2 and data["matches_reference"]
    assert Schedule.from_text(data["schedule"]).to_text() == data["schedule"]  # the plan as text
    assert data["bubble_fraction_retimed"] == pytest.approx(1 / 5, rel=1e-9)
    assert data["peak_activations_per_stage"] == [2, 1]


def test_cli_zb_h1_defaults_to_the_papers_equal_passes(capsys):
    """Without --t-*, zb-h1 retimes with Qi et al.'s T_F = T_B = T_W (1F1B keeps t_b = 2 as one
    full backward): the same work per rank, and ZB-H1's bubble is a third of 1F1B's."""
    runs = {}
    for name in ("zb-h1", "1f1b"):
        args = ["run", "pipeline", "--schedule", name, "--stages", "2", "--microbatches", "4"]
        assert main([*args, "--json"]) == 0
        runs[name] = json.loads(capsys.readouterr().out)
    zb, one = runs["zb-h1"], runs["1f1b"]
    assert zb["times"] == {"t_f": 1.0, "t_b": 1.0, "t_w": 1.0, "t_comm": 0.0}
    assert one["times"] == {"t_f": 1.0, "t_b": 2.0, "t_w": 0.0, "t_comm": 0.0}
    assert zb["matches_reference"] and zb["follows_schedule"]
    assert zb["bubble_fraction_retimed"] == pytest.approx(zb["bubble_fraction_formula"])
    zb_idle = zb["makespan_retimed"] - 4 * 3  # per rank: M (t_f + t_b + t_w) of work
    one_idle = one["makespan_retimed"] - 4 * 3
    assert zb_idle * 3 == pytest.approx(one_idle) and zb_idle > 0
    with pytest.raises(SystemExit):
        main(["run", "pipeline", "--help"])
    assert "zb-h1: 1, Qi et al. 2023" in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize(
    "args,message",
    [
        (["--schedule", "zb"], "error: --schedule='zb' is not valid"),
        (
            ["--stages", "4", "--world-size", "2"],
            "error: --stages=4 is not valid: expected an integer in [1, 2]",
        ),
        (
            ["--stages", "2", "--layers", "1"],
            "error: --layers=1 is not valid: expected an integer >= 2",
        ),
        (["--stages", "2", "--t-b", "0"], "error: --t-b=0.0 is not valid"),
    ],
)
def test_cli_errors_are_one_line(capsys, args, message):
    assert main(["run", "pipeline", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1


def test_bubble_and_comm_tables_equal_the_runs_and_the_formulas(cluster4):
    runs = [run_pipeline(cluster4, name, 4, 8) for name in ("gpipe", "1f1b")]
    runs.append(run_pipeline(cluster4, "interleaved", 4, 8, 2))
    table = bubble_table(runs)
    assert list(table.index) == [("gpipe", 8), ("1f1b", 8), ("interleaved", 8)]
    for r in runs:
        row = table.loc[(r.schedule, 8)]
        b = r.bubble_fraction_retimed
        assert row["modelled (share)"] == b and row["modelled/(1-modelled)"] == b / (1 - b)
        assert row["formula (share)"] == r.bubble_fraction_formula
        assert row["formula (bubble/ideal)"] == r.bubble_relative_to_ideal_formula
        assert row["peak stashed per stage"] == r.peak_activations_per_stage
        assert row["matches reference"] and (row["P"], row["v"]) == (4, r.chunks)
        assert row["modelled/(1-modelled)"] == pytest.approx(row["formula (bubble/ideal)"])
    assert table.loc[("1f1b", 8), "formula (share)"] == pytest.approx(gpipe_bubble(4, 8))
    assert table.loc[("gpipe", 8), "formula (bubble/ideal)"] == pytest.approx(megatron_bubble(4, 8))
    assert table.loc[("interleaved", 8), "formula (bubble/ideal)"] == pytest.approx(
        interleaved_bubble(4, 8, 2)
    )
    sched = build_schedule("1f1b", 4, 16)
    comm = comm_table(sched, 1.0, 2.0, (0.0, 0.5))
    assert comm["messages"].tolist() == [2 * 3 * 16] * 2
    assert comm.loc[0.5, "transfer time"] == 2 * 3 * 16 * 0.5
    assert comm.loc[0.0, "run longer by"] == 0.0
    longer = time_schedule(sched, 1.0, 2.0, t_comm=0.5).makespan
    assert comm.loc[0.5, "run longer by"] == longer - time_schedule(sched, 1.0, 2.0).makespan
    assert 0 < comm.loc[0.5, "run longer by"] < comm.loc[0.5, "transfer time"]  # mostly hidden


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_report_fits_the_output_area_and_its_grid_shows_every_action_once(cluster4, lang):
    """Lesson 10: an interleaved grid of 58 time units continues below itself, never past
    MAX_TEXT_COLUMNS (it was 231 columns wide, and wrapped mid-label)."""
    report = run_pipeline(cluster4, "interleaved", stages=4, microbatches=8, chunks=2)
    with language(lang):
        text = format_pipeline(report)
    assert max(wcswidth(line) for line in text.splitlines()) <= MAX_TEXT_COLUMNS
    labels = re.findall(r"\b\d+[FBIW]\d+\b", text)
    assert sorted(labels) == sorted(s.action.text() for s in report.timeline.spans)
    assert "t = 29" in text  # the second block says where it starts
