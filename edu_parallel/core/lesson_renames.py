"""The lessons' former names, so that what a learner already has keeps working.

In December 2026 (issue 32) lesson 04 was split in two (``05_nccl_in_practice`` is its second
half) and a lesson was inserted before the 3D planner (``11_bytes_to_time``); every lesson from the
old 05 on moved. A learner's workspace may still hold the old files, and its exercise record the
old lesson numbers: the workspace refresh renames the files (edits kept,
:mod:`edu_parallel.app.workspace`, from :data:`FORMER_STEMS`), and the exercise record and an old
``check("05", ...)`` read the old exercise ids (:mod:`edu_parallel.exercises.progress` and
``registry``, from :data:`FORMER_EXERCISES`: the two-level all-reduce moved from lesson 13 to
lesson 05, so an exercise's old id is not always its lesson's old number). This module is the one
home of both tables.
"""

from __future__ import annotations

FORMER_STEMS: dict[str, str] = {  # the stem a lesson had before 2026-12 -> its stem now
    "05_dp_bucketing_overlap": "06_dp_bucketing_overlap",
    "06_zero_fsdp": "07_zero_fsdp",
    "07_tensor_parallel": "08_tensor_parallel",
    "08_expert_parallel": "09_expert_parallel",
    "09_pipeline": "10_pipeline",
    "10_3d_planner": "12_3d_planner",
    "11_compression": "13_compression",
    "12_sync_async": "14_sync_async",
    "13_landscape": "15_landscape",
}
FORMER_EXERCISES: dict[str, str] = {  # an exercise's id before 2026-12 -> its function's name
    "02": "my_chain_broadcast",
    "03": "my_ring_allreduce",
    "04": "my_tree_reduce",
    "05": "my_bucketed_reducer",
    "06": "my_zero1_step",
    "07": "my_row_parallel_linear",
    "08": "my_moe_dispatch",
    "09": "my_1f1b",
    "10": "my_mesh_groups",
    "13": "my_two_level_allreduce",  # lesson 13's then; lesson 05's now, beside the run it grades
}


def current_name(name: str) -> str:
    """A lesson's file name now, for one it had before (``zh/09_pipeline.ipynb`` ->
    ``zh/10_pipeline.ipynb``); any other name unchanged."""
    folder, _, file = name.rpartition("/")
    stem, dot, suffix = file.partition(".")
    new = FORMER_STEMS.get(stem)
    if new is None:
        return name
    return (folder + "/" if folder else "") + new + dot + suffix
