"""The run's degrees are validated once (:class:`ParallelDims`) and passed down; a run of the CLI
parses its size once, builds its plan once, and its checks never rewrite the arguments."""

from __future__ import annotations

import json
import re

import pytest
from helpers import checked_names, count_checks, english_phrases, fresh_python, no_process_cluster

from edu_parallel import Cluster
from edu_parallel.app import cli
from edu_parallel.app.concepts.registry import CONCEPTS
from edu_parallel.comm.allreduce import allreduce_job
from edu_parallel.comm.collective import collective_job
from edu_parallel.core import dims as dims_module
from edu_parallel.core import inputs
from edu_parallel.core.dims import MAX_LOCAL_WORLD_SIZE, ParallelDims
from edu_parallel.core.i18n import language
from edu_parallel.engine.cluster import local_dims
from edu_parallel.engine.executor import Executor
from edu_parallel.engine.torchrun import TorchrunExecutor
from edu_parallel.plans import algorithms
from edu_parallel.plans.algorithms import AllReduceRun, plan_allreduce
from edu_parallel.plans.collectives import CollectiveRun, plan_collective


def test_degrees_multiply_to_the_world_size() -> None:
    d = ParallelDims(8, tp=2, pp=2)
    assert (d.world_size, d.dp, d.tp, d.pp, d.ep) == (8, 2, 2, 2, 1)
    assert d.degrees == {"dp": 2, "tp": 2, "pp": 2}
    assert ParallelDims(8, dp=4, tp=2, ep=8).dp == 4
    assert ParallelDims(4.0).world_size == 4  # a whole float is taken, as check_int takes it
    assert ParallelDims.local(16).max_world_size == MAX_LOCAL_WORLD_SIZE


def test_one_error_names_every_bad_factor() -> None:
    with pytest.raises(ValueError) as err:
        ParallelDims(8, tp=3, pp=0, ep="x")
    text = str(err.value)
    assert "tp=3 is not valid: expected a divisor of world_size=8" in text
    assert "pp=0 is not valid: expected an integer in [1, 8]" in text
    assert "ep='x' is not valid" in text
    cases = [
        (dict(world_size=0), "world_size=0 is not valid: expected an integer >= 1"),
        (dict(world_size=17, max_world_size=16), "expected an integer in [1, 16]"),
        (
            dict(world_size=8, tp=2, dp=3),
            "dp * tp * pp = 3 * 2 * 1 = 6 is not valid: expected world_size=8",
        ),
        (dict(world_size=8, tp=4, pp=4), "tp * pp = 4 * 4 = 16 is not valid"),
        (dict(world_size=8, pp=2, ep=8), "ep=8 is not valid: expected a divisor of dp * tp = 4"),
    ]
    for kwargs, message in cases:
        with pytest.raises(ValueError, match=re.escape(message)):
            ParallelDims(**kwargs)


def test_the_model_and_the_schedule_are_checked_against_the_degrees() -> None:
    """TP divides heads and hidden, PP (times chunks) divides the layers, interleaving needs a
    multiple of PP microbatches; one error names every bad factor, model and mesh alike."""
    ok = ParallelDims(8, tp=2, pp=2, layers=8, heads=4, hidden=16, microbatches=4, chunks=2)
    assert (ok.dp, ok.chunks, ok.layers) == (2, 2, 8)
    with pytest.raises(ValueError) as err:
        ParallelDims(8, dp=4, tp=3, pp=2, heads=4, hidden=8, layers=3)
    text = str(err.value)
    for part in (
        "tp=3 is not valid: expected a divisor of world_size=8",
        "tp=3 is not valid: expected a divisor of heads=4",
        "tp=3 is not valid: expected a divisor of hidden=8",
        "pp=2 is not valid: expected a divisor of layers=3",
    ):
        assert part in text
    cases = [
        (dict(pp=8, layers=4), "pp=8 is not valid: expected at most layers=4"),
        (dict(pp=2, layers=6, chunks=2), "pp * chunks = 4 is not valid: expected a divisor of"),
        (dict(pp=2, layers=8, chunks=2, microbatches=3), "microbatches=3 is not valid"),
        (dict(tp=2, heads=0), "heads=0 is not valid: expected an integer >= 1"),
        (dict(dp=3, tp=2, pp=2), "dp * tp * pp = 3 * 2 * 2 = 12 is not valid"),
    ]
    for kwargs, message in cases:
        with pytest.raises(ValueError, match=re.escape(message)):
            ParallelDims(8, **kwargs)
    assert ParallelDims(8, pp=2, layers=8, chunks=1, microbatches=3).microbatches == 3


def test_coordinates_and_groups_put_tp_fastest() -> None:
    d = ParallelDims(8, tp=2, pp=2)
    assert [d.rank_of(**d.coords(r)) for r in range(8)] == list(range(8))
    assert d.coords(5) == {"pp": 1, "dp": 0, "tp": 1}
    assert d.groups("tp") == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert d.groups("dp") == [[0, 2], [1, 3], [4, 6], [5, 7]]
    assert d.groups("pp") == [[0, 4], [1, 5], [2, 6], [3, 7]]
    every = sorted(r for dim in ("tp", "dp", "pp") for g in d.groups(dim) for r in g)
    assert every == sorted(list(range(8)) * 3)
    with pytest.raises(ValueError, match="dim='cp' is not valid"):
        d.groups("cp")
    moe = ParallelDims(8, tp=2, ep=2)  # dp = 4: EP blocks of 2 inside each DP group
    assert moe.groups("dp") == [[0, 2, 4, 6], [1, 3, 5, 7]]
    assert moe.groups("ep") == [[0, 2], [4, 6], [1, 3], [5, 7]]
    assert moe.groups("edp") == [[0, 4], [2, 6], [1, 5], [3, 7]]
    with pytest.raises(ValueError, match="ep=4 is not valid: expected a divisor of dp=2"):
        ParallelDims(8, tp=2, pp=2, ep=4).groups("ep")


def test_executors_share_one_interface() -> None:
    for cls in (Cluster, TorchrunExecutor):
        assert all(callable(getattr(cls, m)) for m in ("run", "sized", "close", "__enter__"))
    with pytest.raises(ValueError, match="world_size=17 is not valid: expected an integer in"):
        Cluster(ParallelDims(17))  # dims validated without the local limit are checked against it


@pytest.mark.multiprocess
def test_a_cluster_takes_the_dims_it_is_given(cluster2) -> None:
    assert isinstance(cluster2, Executor) and cluster2.dims == ParallelDims(2)
    dims = ParallelDims.local(2)
    with Cluster(dims, timeout=20) as c:
        assert c.dims is dims and c.world_size == 2
        with c.sized(2) as same, c.sized(3) as other:
            assert same is c and other.world_size == 3 and other.backend == c.backend
        assert not other.alive


@pytest.mark.multiprocess
def test_run_ring_validates_parses_and_plans_once(monkeypatch, capsys) -> None:
    """``edu-parallel run ring``: one ParallelDims, one parse of --size, one plan (the ranks and the
    report receive it), where four checks, four plans and two parses used to be."""
    counts = {"dims": 0, "parse": 0, "plan": 0}

    def counting(name, fn):
        def wrapper(*args, **kwargs):
            counts[name] += 1
            return fn(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(dims_module.ParallelDims, "_check", counting("dims", ParallelDims._check))
    monkeypatch.setattr(inputs, "parse_size", counting("parse", inputs.parse_size))
    monkeypatch.setattr(algorithms, "build_plan", counting("plan", algorithms.build_plan))
    code = cli.main(["run", "ring", "--world-size", "3", "--size", "1KiB", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["matches_builtin"] and out["world_size"] == 3
    assert counts == {"dims": 1, "parse": 1, "plan": 1}


def test_help_states_the_limit_the_cluster_enforces(capsys) -> None:
    with pytest.raises(SystemExit):
        cli.main(["run", "ring", "--help"])
    assert f"ranks, 1..{MAX_LOCAL_WORLD_SIZE}" in capsys.readouterr().out


def test_checks_do_not_rewrite_the_arguments() -> None:
    parser = cli.build_parser()
    for argv in (["run", "pipeline"], ["run", "pipeline", "--stages", "2"], ["run", "zero"]):
        a = parser.parse_args(argv)
        before = dict(vars(a))
        dims, spec = CONCEPTS[a.concept].prepare(a, None)
        assert vars(a) == before and isinstance(dims, ParallelDims) and spec is not None
    a = parser.parse_args(["run", "pipeline"])
    dims, spec = CONCEPTS["pipeline"].prepare(a, None)  # --world-size, else --stages, else 4
    assert dims.world_size == spec.stages == 4 and a.stages is None


# ------------------------------------------------ the world size of run ring, checked once
@pytest.mark.parametrize(
    "argv, job, spec",
    [
        (["ring", "--world-size", "3", "--size", "1KiB"], allreduce_job, AllReduceRun),
        (["allreduce", "--algo", "tree", "--world-size", "5"], allreduce_job, AllReduceRun),
        (["allgather", "--world-size", "3", "--size", "96"], collective_job, CollectiveRun),
        (["broadcast", "--world-size", "3", "--root", "2"], collective_job, CollectiveRun),
    ],
)
def test_the_world_size_is_checked_once_on_its_way_to_the_ranks(monkeypatch, argv, job, spec):
    """CLI -> ``ParallelDims.local`` -> the concept's check -> ``plan_allreduce`` /
    ``plan_collective`` (the plan builders) -> ``Cluster(dims)`` -> ``local_dims`` -> the ranks'
    job: one check of ``--world-size`` (a ``check_int`` of it anywhere counts), one ParallelDims,
    and the cluster and the job's plan are built from that same object. No process starts."""
    records = no_process_cluster(monkeypatch)
    built = count_checks(monkeypatch, ParallelDims)
    names = checked_names(monkeypatch)
    assert cli.main(["run", *argv]) == 0
    assert names.count("world_size") == 1 and len(built) == 1
    ((cluster, fn, (run,)),) = records
    assert cluster.dims is built[0] and fn is job and isinstance(run, spec)
    assert run.plan.world_size == built[0].world_size == int(argv[argv.index("--world-size") + 1])


def test_a_plain_world_size_from_python_is_checked_once_at_its_entry(monkeypatch) -> None:
    names = checked_names(monkeypatch)
    assert plan_allreduce(4, "1KiB").plan.world_size == 4
    assert plan_collective(4, "broadcast", "1KiB", root=1).plan.root == 1
    assert plan_allreduce(ParallelDims.local(4), algo="naive").plan.world_size == 4
    assert names.count("world_size") == 3  # one per entry, the last one ParallelDims's
    for bad in (0, 5000, "x"):
        with pytest.raises(ValueError, match=f"world_size={bad!r} is not valid: expected an"):
            plan_allreduce(bad)


def test_local_dims_trusts_validated_dims_and_keeps_their_degrees(monkeypatch) -> None:
    built, names = count_checks(monkeypatch, ParallelDims), checked_names(monkeypatch)
    local = ParallelDims.local(8, tp=2, pp=2)
    assert local_dims(local) is local and len(built) == 1 and names.count("world_size") == 1
    launched = ParallelDims(8, tp=2)  # validated without the local limit: only that is checked
    assert local_dims(launched) is launched and launched.tp == 2
    assert len(built) == 2 and names.count("world_size") == 3
    with pytest.raises(ValueError, match=r"world_size=17 is not valid: expected an integer in"):
        local_dims(ParallelDims(17, tp=17))
    assert local_dims(4) == ParallelDims.local(4)


def test_a_bad_option_of_a_comm_concept_is_named_before_torch_loads() -> None:
    """``edu-parallel run ring --size 1XB`` checks everything from ``plans/`` and ``core/``: the
    one-line error comes before torch (2 s to import here) or any process."""
    code = (
        "from edu_parallel.app.cli import main\n"
        "print(main(['run', 'ring', '--world-size', '3', '--size', '1XB']))\n"
    )
    run = fresh_python(code)  # and torch was never imported
    assert run.stdout.split() == ["2"], run.stderr
    assert run.stderr.strip().splitlines() == [
        "error: --size='1XB' is not valid: expected a byte count > 0 and <= 1GiB, such as 4096, "
        "64KiB, 1MiB"
    ]


# each bad combination ParallelDims names, with the fact its message must carry in both languages
_BAD_DIMS = [
    (dict(tp=3), "world_size=8"),
    (dict(dp=3, tp=2), "dp * tp * pp = 3 * 2 * 1 = 6"),
    (dict(tp=2, heads=3), "heads=3"),
    (dict(tp=2, hidden=5), "hidden=5"),
    (dict(pp=2, layers=3), "layers=3"),
    (dict(pp=4, chunks=2, layers=4), "layers=4 / chunks=2"),
    (dict(pp=2, chunks=3, layers=8), "pp * chunks = 6"),
    (dict(pp=2, chunks=2, layers=8, microbatches=3), "pp=2"),
    (dict(dp=0), "dp=0"),
    (dict(ep=3), "ep=3"),
]


@pytest.mark.parametrize(("degrees", "fact"), _BAD_DIMS)
def test_a_bad_combination_of_degrees_is_named_in_chinese(degrees, fact) -> None:
    """The degree errors that a learner meets in lessons 08 to 12 and in ``run`` / ``planner``
    come through the catalog: the zh message holds the same numbers and no English phrase."""
    messages = {}
    for lang in ("en", "zh"):
        with language(lang), pytest.raises(ValueError) as err:
            ParallelDims(8, **degrees)
        messages[lang] = str(err.value)
    assert fact in messages["en"] and fact in messages["zh"], messages
    assert "is not valid" in messages["en"] and "无效" in messages["zh"], messages
    assert not english_phrases(messages["zh"]), messages["zh"]
