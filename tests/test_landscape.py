"""Lesson 15's landscape as data: the libraries (errata E6), the backend each vendor's GPUs get, the
frameworks mapped to modules that import and lessons that exist, and the lesson's quiz recomputed
from independent formulas."""

from __future__ import annotations

import importlib

import pytest
import torch.distributed as dist

from edu_parallel.app.course.frameworks import FRAMEWORKS, frameworks_table, mapping_table
from edu_parallel.app.course.landscape import LIBRARIES, backend_table, libraries_table
from edu_parallel.app.course.lessons import LESSONS
from edu_parallel.models.links import LINKS
from edu_parallel.quiz import BANKS, landscape_quiz
from edu_parallel.viz import wrapped


def test_libraries_name_maker_backend_and_source():
    table = libraries_table()
    assert list(table.index) == [lib.name for lib in LIBRARIES]
    for name in ("NCCL", "RCCL", "Gloo", "MPI", "oneCCL", "HCCL", "MSCCL / MSCCL++"):
        assert name in table.index
    assert "NVSHMEM / rocSHMEM" in table.index
    for lib in LIBRARIES:
        assert lib.maker and lib.hardware and lib.collectives and lib.algorithms and lib.source
    backends = table["backend"].to_dict()
    assert backends["NCCL"] == backends["RCCL"] == "nccl"  # RCCL is loaded under the name nccl
    assert (backends["Gloo"], backends["MPI"], backends["oneCCL"], backends["HCCL"]) == (
        "gloo",
        "mpi",
        "xccl",
        "hccl",
    )
    for lib in LIBRARIES:  # every backend a library claims is one torch knows, or a plugin's
        if lib.backend in ("nccl", "gloo", "mpi", "xccl"):
            assert lib.backend in dist.Backend.backend_list
    rccl = table.loc["RCCL"]
    assert "RCXL" in rccl["source"] and "RCCLX is Meta's fork" in rccl["source"]  # errata E6
    assert "NVLS" in table.loc["NCCL", "algorithms"] and "PAT" in table.loc["NCCL", "algorithms"]


def test_backend_table_reads_torch_and_the_engine_rule():
    table = backend_table()
    torch_map = dist.Backend.default_device_backend_map
    assert table.loc["NVIDIA GPU (CUDA)", "torch backend"] == torch_map["cuda"] == "nccl"
    assert table.loc["AMD GPU (ROCm: torch.cuda is HIP)", "torch backend"] == "nccl"
    assert table.loc["AMD GPU (ROCm: torch.cuda is HIP)", "library"] == "RCCL"
    assert table.loc["CPU only (this machine)", "this course's engine"] == "gloo"
    assert table.loc["NVIDIA GPU (CUDA)", "this course's engine"].startswith("nccl")
    assert table.loc["Intel GPU (XPU)", "this course's engine"] == "gloo"
    other = backend_table({"cuda": "nccl", "cpu": "gloo"})  # a torch without xpu
    assert other.loc["Intel GPU (XPU)", "torch backend"] == "(not in this torch)"


def test_frameworks_map_to_modules_that_import_and_lessons_that_exist():
    stems = {lesson.stem for lesson in LESSONS}
    assert "15_landscape" in stems
    names = [f.name for f in FRAMEWORKS]
    for want in ("Megatron", "DeepSpeed", "FSDP2", "Colossal-AI", "GSPMD"):
        assert any(want in n for n in names), want
    for f in FRAMEWORKS:
        assert f.parallelisms and f.adds and f.source and f.ours
        for same in f.ours:
            assert importlib.import_module(same.module), same.module
            assert same.lesson in stems, same.lesson
    assert "context parallel" in frameworks_table().loc["Megatron-LM (Megatron-Core)", "adds"]
    assert len(mapping_table()) == sum(len(f.ours) for f in FRAMEWORKS)


@pytest.mark.parametrize("seed", (None, 0, 1, 2))
def test_quiz_answers_match_independent_formulas(seed):
    assert BANKS["15_landscape"] is landscape_quiz
    quiz = landscape_quiz(seed=seed)
    assert len(quiz.questions) >= 6
    p = quiz.by_key("port_gbps").params
    assert quiz.by_key("port_gbps").answer == pytest.approx(p["gbps"] / 8)
    p = quiz.by_key("xgmi_gpu_gbps").params
    assert quiz.by_key("xgmi_gpu_gbps").answer == pytest.approx(
        p["links"] * p["link_bidir_gbps"] / 2
    )
    p = quiz.by_key("node_nic_gbps").params
    assert quiz.by_key("node_nic_gbps").answer == pytest.approx(p["nics"] * p["gbps"] / 8)
    p = quiz.by_key("two_level_cross").params
    want = 2 * (p["K"] - 1) / p["K"] * p["S"] / p["g"]
    assert quiz.by_key("two_level_cross").answer == pytest.approx(want)
    q = quiz.by_key("predict_retimed_ring")
    n, s = q.params["N"], q.params["S"]
    link = LINKS[q.params["link"]]
    want_us = (2 * (n - 1) * link.alpha_s + 2 * (n - 1) / n * s / link.bandwidth_Bps) * 1e6
    assert q.predict.answer == pytest.approx(want_us)
    assert q.check(want_us).correct and q.has_run  # the simulated run retimes to the formula


def test_the_libraries_table_wraps_its_long_words_to_fit_the_page():
    html = wrapped(libraries_table()).to_html()
    assert "overflow-wrap: anywhere" in html and "github.com/ROCm/rccl" in html
