"""The lessons' former names, so that what a learner already has keeps working.

In December 2026 (issue 32) lesson 04 was split in two (``05_nccl_in_practice`` is its second
half) and a lesson was inserted before the 3D planner (``11_bytes_to_time``); every lesson from the
old 05 on moved. A learner's workspace may still hold the old files, and its exercise record the
old lesson numbers: the workspace refresh renames the files (edits kept,
:mod:`edu_parallel.app.workspace`) and the progress record reads the old numbers
(:mod:`edu_parallel.exercises.progress`), both from :data:`FORMER_STEMS`, the one home of the
table.
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
FORMER_NUMBERS: dict[str, str] = {  # a lesson's number before 2026-12 -> its number now
    old.split("_", 1)[0]: new.split("_", 1)[0] for old, new in FORMER_STEMS.items()
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
