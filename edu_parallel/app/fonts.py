"""Whether this machine can draw the course's Chinese: a CJK font, as fontconfig lists it.

The index quotes the outline in Chinese, and the 简体中文 lessons are Chinese throughout. A browser
on a machine without a CJK font (a fresh Debian or Ubuntu) draws every such character as an empty
box. ``edu-parallel lab`` asks fontconfig (``fc-list :lang=zh``) before it starts, and where none
is found says in one line what to install. Where there is no ``fc-list`` (macOS and Windows ship
CJK fonts and draw them without fontconfig) nothing is said.
"""

from __future__ import annotations

import shutil
import subprocess

from ..core.i18n import _

FC_LIST = ("fc-list", ":lang=zh", "family")  # the font families that cover Chinese


def has_cjk_font() -> bool | None:
    """True when fontconfig lists a font covering Chinese, False when it lists none, None when
    it cannot be asked (no ``fc-list``, or it failed)."""
    if shutil.which(FC_LIST[0]) is None:
        return None
    try:
        out = subprocess.run(FC_LIST, capture_output=True, text=True, timeout=20, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return bool(out.stdout.strip())


def cjk_font_note() -> str | None:
    """The line to print when this machine has no font for the course's Chinese, else None."""
    if has_cjk_font() is not False:
        return None
    return _(
        "note: no Chinese font found (fc-list :lang=zh lists none), so the Chinese lessons and"
        " the outline's quotes would show as empty boxes; install one, e.g. on Debian or Ubuntu:"
        " sudo apt install fonts-noto-cjk"
    )
