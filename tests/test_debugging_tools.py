"""The failure lab's tools on real ranks: the send/recv deadlock and its two fixes, the rank that
diverges (caught by parameter checksums), torch's own ``monitored_barrier`` and
``TORCH_DISTRIBUTED_DEBUG=DETAIL`` fingerprint check on gloo, and the GPU tools shown as text.
After every failure the cluster runs the next job."""

from __future__ import annotations

import importlib.util
import inspect
import mmap
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import torch.distributed as dist
from torch.distributed import distributed_c10d
from torch.distributed.flight_recorder.components import config_manager, types, utils

from edu_parallel import Cluster
from edu_parallel.core.i18n import language
from edu_parallel.debugging import (
    GPU_TOOLS,
    ORDERS,
    compare_checksums,
    fingerprint_text,
    monitored_barrier_text,
    param_checksum,
    run_divergence,
    run_exchange,
)
from edu_parallel.debugging.deadlock import exchange
from edu_parallel.debugging.gpu_tools import NOT_RUN, gpu_tools_table

pytestmark = pytest.mark.multiprocess


def usable(ctx) -> tuple[float, int]:
    """A rank job: an all-reduce on the default group, and the debug level the rank is at."""
    t = torch.ones(2)
    ctx.collective("all_reduce", t)
    return float(t[0]), int(dist.get_debug_level())


@pytest.fixture(scope="module")
def c():
    with Cluster(4, timeout=1) as cluster:
        yield cluster


def assert_usable(cluster, restarts: int) -> None:
    """The next job runs on the cluster's ranks, all at the debug level OFF, with no restart."""
    assert cluster.run(usable).results == [(4.0, int(dist.DebugLevel.OFF))] * 4
    assert cluster.restarts == restarts


# ------------------------------------------------------------------ the send/recv deadlock
def test_receiving_first_deadlocks_and_the_diagnosis_names_both_cycles(c):
    before = c.restarts
    r = run_exchange(c, "recv_first")
    assert (r.order, r.ok, r.values) == ("recv_first", False, ())
    assert r.diagnosis.kind == "deadlock" and r.diagnosis.cycles == ((0, 1), (2, 3))
    assert r.diagnosis.culprits == (0, 1, 2, 3)
    assert {s.op.kind for s in r.diagnosis.ranks} == {"recv"}
    assert r.message.startswith("recv_first: hung after 1.")
    assert "; deadlock: rank 0 waits in recv #1 from rank 1" in r.message
    assert 1.0 <= r.elapsed_s < 1.0 + 2.0  # the job's timeout, plus at most 2 s
    fixed = run_exchange(c, "even_sends_first")  # the next job restarts the ranks, once
    assert fixed.ok and c.restarts == before + 1


@pytest.mark.parametrize("order", ["even_sends_first", "batched"])
def test_each_fix_swaps_the_partners_tensors(c, order):
    r = run_exchange(c, order)
    assert (r.ok, r.values, r.diagnosis) == (True, (1.0, 0.0, 3.0, 2.0), None)
    assert r.message.startswith(f"{order}: every rank received its partner's tensor in ")


def test_a_batched_exchange_is_in_the_flight_record_and_the_trace(c):
    run_exchange(c, "batched")
    found = c.diagnose(finished=range(4))  # the records stay readable until the next job
    for s in found.ranks:
        peer = s.rank ^ 1
        assert [(op.kind, op.peer, op.seq, op.numel) for op in s.ops] == [
            ("send", peer, 1, 4),
            ("recv", peer, 1, 4),
        ]
        assert all(op.done > 0 for op in s.ops)
    trace = c.run(exchange, "batched").trace
    assert sorted((e.rank, e.peer) for e in trace.select("send")) == [
        (0, 1),
        (1, 0),
        (2, 3),
        (3, 2),
    ]
    assert len(trace.matched_transfers()) == 4


def test_bad_orders_and_odd_clusters_are_refused_before_any_job():
    with pytest.raises(
        ValueError,
        match=r"^order='both' is not valid: expected one of "
        r"'recv_first', 'even_sends_first', 'batched'$",
    ):
        run_exchange(SimpleNamespace(world_size=4), "both")
    with pytest.raises(ValueError, match=r"^world_size=3 is not valid: expected an even number"):
        run_exchange(SimpleNamespace(world_size=3), "batched")
    with pytest.raises(ValueError, match=r"^timeout=0 is not valid"):
        run_exchange(SimpleNamespace(world_size=4), "batched", timeout=0)
    assert ORDERS == ("recv_first", "even_sends_first", "batched")


# ------------------------------------------------------------------ a rank that diverges
def test_the_checksum_is_the_float64_sum_of_every_parameter():
    torch.manual_seed(0)
    lin = torch.nn.Linear(3, 2)
    want = float(lin.weight.detach().double().sum() + lin.bias.detach().double().sum())
    assert param_checksum(lin) == param_checksum([lin.weight, lin.bias]) == want
    assert param_checksum(torch.ones(3, dtype=torch.float16)) == 3.0
    with pytest.raises(ValueError, match=r"^model_or_tensors=1 is not valid"):
        param_checksum([1])


def test_compare_checksums_names_the_ranks_apart_from_the_majority():
    assert compare_checksums([1.0, 1.0, 2.0, 1.0]) == (2,)
    assert compare_checksums([5.0, 1.0, 1.0, 1.0]) == (0,)
    assert compare_checksums([1.0, 2.0]) == (1,)  # a tie: the side of rank 0 is the reference
    assert compare_checksums([1.0, 1.0 + 1e-9, 1.0]) == (1,)
    assert compare_checksums([1.0, 1.0 + 1e-9, 1.0], rtol=1e-6) == ()
    for bad, match in (([], "checksums"), ([1.0, float("nan")], "checksums")):
        with pytest.raises(ValueError, match=rf"^{match}=.* is not valid"):
            compare_checksums(bad)
    with pytest.raises(ValueError, match=r"^rtol=-1 is not valid"):
        compare_checksums([1.0], rtol=-1)


@pytest.mark.parametrize("culprit", [0, 2, 3])  # rank 0, a middle rank, the last rank
def test_a_rank_seeded_otherwise_is_caught_by_its_checksum(c, culprit):
    rep = run_divergence(c, culprit)
    assert rep.differing == (culprit,) and compare_checksums(rep.before) == (culprit,)
    others = {a for r, a in enumerate(rep.after) if r != culprit}
    assert len(others) == 1 and rep.after[culprit] not in others
    assert rep.message.startswith(f"rank {culprit} holds other parameters than the others")


def test_ranks_seeded_alike_stay_alike(c):
    rep = run_divergence(c, None)
    assert rep.differing == () and len(set(rep.before)) == len(set(rep.after)) == 1
    assert rep.before != rep.after  # the step moved them
    assert rep.message.startswith("every rank holds the same parameters after one step")
    with language("zh"):
        said = run_divergence(c, 1).message
    assert said.startswith("一步之后，rank 1 的参数与其他 rank 不同（校验和 ")
    with pytest.raises(ValueError, match=r"^diverging_rank=4 is not valid"):
        run_divergence(c, 4)


# ------------------------------------------------------------------ torch's own tools
@pytest.mark.parametrize("missing", [2, 3])
def test_monitored_barrier_names_the_missing_rank_in_torchs_words(c, missing):
    restarts = c.restarts
    text = monitored_barrier_text(c, missing, timeout_s=0.5)
    assert text.startswith(f"[Rank 0]: Rank {missing} failed to pass monitoredBarrier in 500 ms")
    assert "Timed out waiting" in text and "for recv operation to complete" in text
    assert_usable(c, restarts)


def test_monitored_barrier_without_rank_0_is_named_by_the_others(c):
    restarts = c.restarts
    text = monitored_barrier_text(c, 0, timeout_s=0.5)
    assert text.startswith(
        "Rank 1 successfully reached monitoredBarrier, but received errors while waiting for "
        "send/recv from rank 0. Please check rank 0 logs for faulty rank."
    )
    assert "Timed out waiting 500ms for send operation to complete" in text
    assert_usable(c, restarts)
    with pytest.raises(ValueError, match=r"^missing=4 is not valid"):
        monitored_barrier_text(c, 4)
    with pytest.raises(ValueError, match=r"^timeout_s=60 is not valid"):
        monitored_barrier_text(c, 1, timeout_s=60)


def test_the_detail_fingerprint_names_a_mismatched_collective(c):
    restarts = c.restarts
    text = fingerprint_text(c, "op")
    assert text.startswith(
        "Detected mismatch between collectives on ranks. Rank 0 is running collective: "
        "CollectiveFingerPrint(SequenceNumber=0, OpType=ALLGATHER, TensorShape=[4]"
    )
    assert "but Rank 1 is running collective: CollectiveFingerPrint(SequenceNumber=0, " in text
    assert text.endswith("Op type: ALLGATHERvs ALLREDUCE")
    assert_usable(c, restarts)


def test_the_detail_fingerprint_names_a_mismatched_size(c):
    restarts = c.restarts
    text = fingerprint_text(c, "size")
    assert "Rank 0 is running collective: CollectiveFingerPrint(SequenceNumber=0, " in text
    assert "OpType=ALLREDUCE, TensorShape=[8]" in text and "TensorShape=[4]" in text
    assert text.endswith("Tensor Tensor shapes: 8vs 4")
    assert_usable(c, restarts)
    with pytest.raises(ValueError, match=r"^mismatch='dtype' is not valid"):
        fingerprint_text(c, "dtype")


# ------------------------------------------------------------------ the GPU tools, as text
def test_every_gpu_tool_is_marked_not_run_and_names_what_torch_and_nccl_read():
    assert len(GPU_TOOLS) == 5 and all(t.run_here == NOT_RUN for t in GPU_TOOLS)
    settings = " ".join(t.setting for t in GPU_TOOLS)
    for name in (
        "TORCH_NCCL_TRACE_BUFFER_SIZE=2000",
        "TORCH_NCCL_DUMP_ON_TIMEOUT=1",
        "TORCH_FR_DUMP_TEMP_FILE=",
        "NCCL_DEBUG=INFO",
        "NCCL_DEBUG_SUBSYS=COLL",
    ):
        assert name in settings
    assert "TORCH_NCCL_TRACE_BUFFER_SIZE" in inspect.getsource(distributed_c10d)
    lib = Path(torch.__file__).parent / "lib" / "libtorch_cpu.so"  # the name c10d reads
    with open(lib, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        assert m.find(b"TORCH_FR_DUMP_TEMP_FILE") >= 0
    # the analyser's command is this torch's module, and takes a folder of dumps
    assert "python -m torch.distributed.flight_recorder.fr_trace" in settings
    assert importlib.util.find_spec("torch.distributed.flight_recorder.fr_trace") is not None
    args = config_manager.JobConfig().parse_args(["/tmp/fr", "-j"])
    assert args.trace_dir == "/tmp/fr" and args.just_print_entries


def test_the_analysers_sample_is_torchs_own_lines_with_placeholders():
    """No invented number: every line of the fr_trace sample is a format string of torch's
    analyser with its %s/%d filled by a <placeholder>."""
    source = inspect.getsource(utils) + inspect.getsource(types)
    fr_trace = next(t for t in GPU_TOOLS if "fr_trace" in t.setting)
    for line in fr_trace.sample.splitlines():
        fixed = re.sub(r"\[<[^>]+>\]|\{?<[^>]+>(, \.\.\.)?\}?|nccl:<op>", "", line).rstrip(": ")
        assert fixed and fixed in source, line
    for t in GPU_TOOLS:
        assert "<" in t.sample and not re.search(r"(?<![<\w/])\d{3,}", t.sample), t.sample


def test_the_gpu_tools_table_reads_in_both_languages():
    table = gpu_tools_table()
    assert list(table.columns) == [
        "tool",
        "setting",
        "what it shows",
        "output format (placeholders in <>)",
        "source of the format",
        "run here",
    ]
    assert len(table) == 5 and set(table["run here"]) == {NOT_RUN}
    with language("zh"):
        zh = gpu_tools_table()  # indexed in English, shown in Chinese
        headers = list(zh.translated().columns)
    assert headers == [
        "工具",
        "设置",
        "显示什么",
        "输出格式（<> 内为占位符）",
        "格式出处",
        "是否在此运行",
    ]
    assert set(zh["run here"]) == {"此处未运行：需要 NVIDIA GPU"}
    assert list(zh["setting"]) == list(table["setting"])  # what is typed stays as typed
