"""The run's degrees are validated once (:class:`ParallelDims`) and passed down; a run of the CLI
parses its size once, builds its plan once, and its checks never rewrite the arguments."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from edu_parallel import Cluster
from edu_parallel.app import cli
from edu_parallel.app.concepts.registry import CONCEPTS
from edu_parallel.core import dims as dims_module
from edu_parallel.core import inputs
from edu_parallel.core.dims import MAX_LOCAL_WORLD_SIZE, ParallelDims
from edu_parallel.engine.executor import Executor
from edu_parallel.engine.torchrun import TorchrunExecutor
from edu_parallel.plans import algorithms


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
        concept = CONCEPTS[a.concept]
        spec = concept.check(a, ParallelDims.local(concept.world_size(a)))
        assert vars(a) == before and isinstance(spec, dict)
    a = parser.parse_args(["run", "pipeline"])
    assert CONCEPTS["pipeline"].world_size(a) == 4  # --world-size, else --stages, else 4
    spec = CONCEPTS["pipeline"].check(a, ParallelDims.local(4))
    assert spec["stages"] == 4 and a.stages is None


def test_a_bad_option_of_a_comm_concept_is_named_before_torch_loads() -> None:
    """``edu-parallel run ring --size 1XB`` checks everything from ``plans/`` and ``core/``: the
    one-line error comes before torch (2 s to import here) or any process."""
    code = (
        "import sys\n"
        "from edu_parallel.app.cli import main\n"
        "code = main(['run', 'ring', '--world-size', '3', '--size', '1XB'])\n"
        "print(code, 'torch' in sys.modules)\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.stdout.split() == ["2", "False"], run.stderr
    assert run.stderr.strip().splitlines() == [
        "error: size='1XB' is not valid: expected a byte count > 0 and <= 1GiB, such as 4096, "
        "64KiB, 1MiB"
    ]
