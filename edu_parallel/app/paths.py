"""Output paths checked before anything runs, so a long run is never lost to a bad path.

:func:`check_output_file` returns the path a command will write, or raises a one-line ValueError
naming the option: an empty path, a folder, a missing or unwritable folder, or (for pictures) a
suffix matplotlib cannot write.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..core.errors import bad_value
from ..core.i18n import _

PICTURE_SUFFIXES = (".png", ".svg", ".pdf")


def check_output_file(
    path: str | os.PathLike[str], option: str, suffixes: tuple[str, ...] = ()
) -> Path:
    """``path`` as a file this process can create or overwrite (its folder must exist)."""
    text = os.fspath(path)
    example = f"figure{suffixes[0]}" if suffixes else "run.json"
    if not text.strip():
        raise bad_value(option, text, _("a file name, such as {example}").format(example=example))
    out = Path(text).expanduser()
    if out.is_dir():
        raise bad_value(
            option,
            text,
            _("a file, not a folder (add a file name: DIR/{example})").format(example=example),
        )
    if suffixes and out.suffix.lower() not in suffixes:
        raise bad_value(
            option, text, _("a file name ending in {suffixes}").format(suffixes=", ".join(suffixes))
        )
    folder = out.parent if str(out.parent) else Path(".")
    if not folder.is_dir():
        raise bad_value(
            option,
            text,
            _("a file in an existing folder ({folder} does not exist)").format(folder=folder),
        )
    if not os.access(folder, os.W_OK) or (out.exists() and not os.access(out, os.W_OK)):
        raise bad_value(
            option,
            text,
            _("a file this user may write ({folder} is read-only)").format(folder=folder),
        )
    return out
