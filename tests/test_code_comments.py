"""A lesson's code comments in Chinese (``app/course/code_comments.py``): found as Python's
tokenizer finds them, replaced without a change to the code, wrapped by display width."""

from __future__ import annotations

from edu_parallel.app.course.code_comments import (
    LINE_LENGTH,
    comments,
    strip_comments,
    too_long,
    with_comments,
)
from edu_parallel.core.width import width

SOURCE = """\
import torch  # a tensor library
# one sentence, wrapped over
# two lines
x = "# not a comment"  # noqa: E501
def f():
    ...  # 1. the first step:
    ...  #    its second line
"""


def test_blocks_inline_comments_and_pragmas():
    found = [(c.first, c.last, c.col, c.inline, c.text, c.pad) for c in comments(SOURCE)]
    assert found == [
        (0, 0, 14, True, "a tensor library", " "),
        (1, 2, 0, False, "one sentence, wrapped over two lines", " "),
        (5, 5, 9, True, "1. the first step:", " "),
        (6, 6, 9, True, "its second line", "    "),  # a hanging indent
    ]  # the string's "#" is no comment, and the pragma is the linter's


def test_translated_comments_leave_the_code_as_it_was():
    zh = with_comments(
        SOURCE,
        {
            "a tensor library": "一个张量库",
            "one sentence, wrapped over two lines": "一句话" * 30,
            "its second line": "它的第二行",
        },
    )
    assert strip_comments(zh) == strip_comments(SOURCE)
    lines = zh.split("\n")
    assert lines[0] == "import torch  # 一个张量库"
    block = lines[1:3]  # two lines still, each within the line length
    assert lines[3].startswith("x = ") and all(width(line) <= LINE_LENGTH for line in block)
    assert "".join(line.removeprefix("# ") for line in block) == "一句话" * 30
    assert "    ...  #    它的第二行" in lines  # under its numbered step, as the English was
    assert "    ...  # 1. the first step:" in lines  # not translated: stays
    assert 'x = "# not a comment"  # noqa: E501' in lines
    assert too_long(zh) == []
    assert too_long("x = 1  # " + "长" * 50) == ["x = 1  # " + "长" * 50]


def test_strip_comments_keeps_strings_and_drops_comment_lines():
    assert strip_comments(SOURCE).split("\n")[:3] == [
        "import torch",
        'x = "# not a comment"',
        "def f():",
    ]


def test_the_line_length_is_ruffs():
    import re
    from pathlib import Path

    pyproject = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    ruff = pyproject.split("[tool.ruff]", 1)[1]  # tomllib is Python 3.11+; the package runs on 3.10
    assert int(re.search(r"^line-length = (\d+)$", ruff, re.M).group(1)) == LINE_LENGTH
