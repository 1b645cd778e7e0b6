"""The lessons were renumbered (issue 32): what a learner already has keeps working.

A workspace copied before holds ``09_pipeline.ipynb`` and an exercise record keyed by the old
lesson numbers; an edited lesson of that time still calls ``check("05", my_bucketed_reducer, ...)``.
"""

from __future__ import annotations

import hashlib
import json

import pytest

from edu_parallel.app.course.lessons import LESSONS
from edu_parallel.app.workspace import sync_workspace
from edu_parallel.core.lesson_renames import FORMER_EXERCISES, FORMER_STEMS, current_name
from edu_parallel.exercises import EXERCISES, get_exercise
from edu_parallel.exercises.progress import WORKSPACE_VAR, load_progress, record_try, tried
from edu_parallel.quiz.shuffle import permutation


def test_every_former_name_is_a_lesson_now_and_no_former_name_is_in_use():
    stems = {lesson.stem for lesson in LESSONS}
    assert set(FORMER_STEMS.values()) <= stems
    assert not set(FORMER_STEMS) & stems  # an old name never names a lesson of today
    assert current_name("zh/09_pipeline.ipynb") == "zh/10_pipeline.ipynb"
    assert current_name("04_ring_tree_ps.ipynb") == "04_ring_tree_ps.ipynb"
    assert current_name("index.ipynb") == "index.ipynb"


def test_an_old_workspace_is_renamed_with_its_edits_then_refreshed_or_kept(tmp_path):
    source, dest = tmp_path / "source", tmp_path / "course"
    (source / "zh").mkdir(parents=True)
    for name in ("10_pipeline.ipynb", "zh/10_pipeline.ipynb", "12_3d_planner.ipynb"):
        (source / name).write_text(f"{name} now")
    # the workspace as the course of November 2026 left it: old names, one edited
    (dest / "zh").mkdir(parents=True)
    (dest / "09_pipeline.ipynb").write_text("09 as copied")
    (dest / "zh" / "09_pipeline.ipynb").write_text("my notes")
    (dest / "10_3d_planner.ipynb").write_text("10 as copied")
    manifest = dest / ".edu-parallel" / "lessons.json"
    manifest.parent.mkdir()
    copied = {
        n: hashlib.sha256((dest / n).read_bytes()).hexdigest()
        for n in ("09_pipeline.ipynb", "10_3d_planner.ipynb")
    }
    copied["zh/09_pipeline.ipynb"] = "the hash of the course's copy, before the notes"
    manifest.write_text(json.dumps(copied))
    report = sync_workspace(dest, source)
    assert report.renamed == [
        ("09_pipeline.ipynb", "10_pipeline.ipynb"),
        ("10_3d_planner.ipynb", "12_3d_planner.ipynb"),
        ("zh/09_pipeline.ipynb", "zh/10_pipeline.ipynb"),
    ]
    assert not (dest / "09_pipeline.ipynb").exists() and not (dest / "10_3d_planner.ipynb").exists()
    assert (dest / "10_pipeline.ipynb").read_text() == "10_pipeline.ipynb now"  # untouched: fresh
    assert (dest / "12_3d_planner.ipynb").read_text() == "12_3d_planner.ipynb now"
    assert (dest / "zh" / "10_pipeline.ipynb").read_text() == "my notes"  # edited: kept
    assert report.kept == ["zh/10_pipeline.ipynb"]
    lines = "\n".join(report.lines())
    assert "09_pipeline.ipynb is now 10_pipeline.ipynb" in lines
    assert "--reset 10" in lines
    assert sync_workspace(dest, source).renamed == []  # once


def test_an_old_progress_record_is_read_by_the_lessons_numbers_of_its_time(tmp_path, monkeypatch):
    monkeypatch.setenv(WORKSPACE_VAR, str(tmp_path))
    record = tmp_path / ".edu-parallel" / "progress.json"
    record.parent.mkdir()
    old = {
        "05": {"tries": 2, "passed": True, "last": "2026-11-30T10:00:00"},  # DDP's, then 05
        "03": {"tries": 1, "passed": False, "last": "2026-11-30T09:00:00"},  # 03 stayed 03
        "13": {"tries": 4, "passed": False, "last": "2026-11-30T11:00:00"},  # the landscape's
    }
    record.write_text(json.dumps(old))
    progress = load_progress()
    assert progress["my_bucketed_reducer"]["passed"] and progress["my_ring_allreduce"]["tries"] == 1
    assert progress["my_two_level_allreduce"]["tries"] == 4
    assert set(progress) == {"my_bucketed_reducer", "my_ring_allreduce", "my_two_level_allreduce"}
    ddp = get_exercise("06")
    assert ddp.function == "my_bucketed_reducer" and tried(ddp)
    got = record_try(ddp, passed=False)  # a new try merges into the old entry
    assert (got["tries"], got["passed"]) == (3, True)
    assert "05" not in json.loads(record.read_text())


def my_bucketed_reducer(ctx, model, config):  # the name an old lesson 05 defines
    raise AssertionError("never run here")


def my_tree_reduce(ctx, tensor):
    raise AssertionError("never run here")


def my_two_level_allreduce(ctx, x, node, rail):  # lesson 13's then, lesson 05's now
    raise AssertionError("never run here")


def test_an_old_lessons_check_call_is_graded_as_the_exercise_its_function_names():
    assert get_exercise("06").function == "my_bucketed_reducer"
    assert get_exercise("05").function == "my_two_level_allreduce"
    assert get_exercise("05", my_bucketed_reducer).function == "my_bucketed_reducer"
    assert get_exercise("13", my_two_level_allreduce).function == "my_two_level_allreduce"
    assert get_exercise("05", my_two_level_allreduce).lesson == "05_nccl_in_practice"
    assert get_exercise("04", my_tree_reduce).function == "my_tree_reduce"  # 04 stayed 04
    functions = {e.function for e in EXERCISES.values()}
    assert set(FORMER_EXERCISES.values()) <= functions  # every exercise of then is one of now
    assert functions - set(FORMER_EXERCISES.values()) == {
        "my_dp_crossover",
        "my_ring_shift",
    }  # lessons 11 and 16
    with pytest.raises(ValueError, match=r"^exercise='99' is not valid"):
        get_exercise("99", my_bucketed_reducer)


def test_a_learners_option_order_survives_the_renumbering():
    keys = [f"q{i}" for i in range(8)]
    before = [permutation(5, "alice", "06_zero_fsdp", k) for k in keys]
    assert [permutation(5, "alice", "07_zero_fsdp", k) for k in keys] == before
    assert [permutation(5, "alice", "07_tensor_parallel", k) for k in keys] != before
