"""core/width.py: display width, and prose lines wrapped to fit the output area (issue 36)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import edu_parallel
from edu_parallel.core.width import MAX_TEXT_COLUMNS, fit, fitted, width, wrap_text

PROSE = (
    "job skip_collective timed out after 1 s: ranks [0, 1, 2] did not finish (rank 0 at:"
    " all_reduce (demo step 0), rank 1 at: all_reduce (demo step 0), rank 2 at: all_reduce"
    " (demo step 0)); rank 3 finished; 1.75 MiB per rank"
)
PROSE_ZH = "作业 skip_collective 在 1 秒后超时：rank [0, 1, 2] 没有完成（rank 0 停在 all_reduce，"
PROSE_ZH *= 3


@pytest.mark.parametrize("text", [PROSE, PROSE_ZH, "  " + PROSE, "x" * 300])
def test_fit_wraps_every_line_within_the_limit_and_keeps_every_word(text):
    out = fit(text)
    assert all(width(line) <= MAX_TEXT_COLUMNS for line in out.split("\n"))
    assert len(out.split("\n")) > 1
    if text is PROSE_ZH or " " not in text.strip():
        assert "".join(out.split()) == "".join(text.split())  # broken between characters
    else:
        assert out.split() == text.split()  # wrapped at spaces: no word lost, split or joined


def test_continuations_hang_under_their_line():
    out = fit("  " + PROSE).split("\n")
    assert out[0].startswith("  ") and not out[0].startswith("   ")
    assert all(line.startswith("    ") for line in out[1:])


def test_a_line_that_fits_and_a_table_are_left_as_they_are():
    table = "\n".join(f"{r:<4}{'1.75 MiB':>12}   " + "x" * 90 for r in range(4))
    assert fit(table) == table
    assert fit("a\n\n  b  \n") == "a\n\n  b  \n"


def test_chinese_breaks_between_characters_never_before_punctuation():
    lines = wrap_text("字" * 59 + "，后面", 120)
    assert width(lines[0]) <= 120
    assert not any(line.startswith("，") for line in lines)
    assert "".join(lines) == "字" * 59 + "，后面"


def test_english_wraps_as_textwrap_does():
    import textwrap

    assert wrap_text(PROSE, 50, hanging="  ") == textwrap.wrap(PROSE, 50, subsequent_indent="  ")


def _formatters():
    """Every ``format_*`` function of the package that returns text."""
    for info in pkgutil.walk_packages(edu_parallel.__path__, "edu_parallel."):
        if ".viz" in info.name or info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for name, fn in vars(module).items():
            own = getattr(fn, "__module__", None) == module.__name__
            if own and name.startswith("format_") and inspect.isfunction(fn):
                annotation = inspect.signature(inspect.unwrap(fn)).return_annotation
                if annotation in ("str", str):
                    yield f"{module.__name__}.{name}", fn


def test_every_report_formatter_fits_its_text():
    """A report a lesson or the command line prints is wrapped by ``fitted``; a new formatter
    that forgets it fails here, before a learner sees a line wrap mid-number."""
    found = dict(_formatters())
    assert "edu_parallel.comm.allreduce.format_report" in found
    assert "edu_parallel.zero.fsdp_report.format_fsdp" in found
    exempt = {
        "edu_parallel.core.units.format_bytes",  # a number, not a report
        "edu_parallel.models.traffic.format_traffic_table",  # a table sized to fit (issue 36)
    }
    missing = [n for n, fn in found.items() if n not in exempt and not hasattr(fn, "__wrapped__")]
    assert not missing, f"format functions that do not fit their text: {missing}"


def test_fitted_keeps_the_formatter_name_and_doc():
    @fitted
    def format_demo(n: int) -> str:
        """Doc."""
        return "word " * n

    assert format_demo.__name__ == "format_demo" and format_demo.__doc__ == "Doc."
    assert max(map(width, format_demo(100).split("\n"))) <= MAX_TEXT_COLUMNS


def test_a_labelled_line_continues_under_its_text():
    out = fit("formula        " + PROSE).split("\n")
    assert out[0].startswith("formula        job")
    assert all(line.startswith(" " * 15) and line[15] != " " for line in out[1:])
    assert all(width(line) <= MAX_TEXT_COLUMNS for line in out)
