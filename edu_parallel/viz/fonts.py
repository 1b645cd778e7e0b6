"""CJK glyphs for the matplotlib figures: 中文 titles and labels without missing-glyph boxes.

matplotlib's default font, DejaVu Sans, has no CJK glyphs: a Chinese title renders as boxes and
matplotlib warns ``Glyph ... missing from font(s) DejaVu Sans``. The package depends on
``mplfonts`` (PyPI), which ships Noto Sans CJK SC (SIL Open Font License). :func:`use_cjk_font`
registers that font file with matplotlib's font manager and appends its family to
``rcParams["font.family"]`` as a fallback (matplotlib >= 3.6 looks each glyph up along the family
list): Latin text keeps the first family (``sans-serif``, i.e. DejaVu Sans), CJK glyphs come from
Noto Sans CJK SC.

It is called by :func:`.figure.new_figure`, where the package's matplotlib figures are created,
never at import; it is idempotent and cheap. mplfonts' own command line (which edits the user's
``matplotlibrc``) is not used.
"""

from __future__ import annotations

import logging
from pathlib import Path

CJK_FAMILY = "Noto Sans CJK SC"
CJK_FONT_FILE = "NotoSansCJKsc-Regular.otf"

_registered: Path | None = None


def cjk_font_path() -> Path | None:
    """The Noto Sans CJK SC file that mplfonts installs, or None without mplfonts."""
    try:
        import mplfonts
    except ImportError:
        return None
    path = Path(mplfonts.__file__).resolve().parent / "fonts" / CJK_FONT_FILE
    return path if path.is_file() else None


def use_cjk_font() -> str | None:
    """Make matplotlib draw CJK glyphs with Noto Sans CJK SC, as a fallback after the current
    font family. Returns the family name, or None when the font is not installed (figures then
    still render, with boxes for CJK glyphs)."""
    global _registered  # matplotlib loads here, as in figure_class(): importing viz stays light
    import matplotlib
    from matplotlib import font_manager

    if _registered is None:
        path = cjk_font_path()
        if path is None:
            return None
        font_manager.fontManager.addfont(str(path))
        _registered = path
    family = matplotlib.rcParams["font.family"]
    family = [family] if isinstance(family, str) else list(family)
    if CJK_FAMILY not in family:
        matplotlib.rcParams["font.family"] = [*family, CJK_FAMILY]
        # mplfonts ships the Regular weight only: a bold title's CJK glyphs are drawn Regular, as
        # intended, and font_manager's "Failed to find font weight bold" warning is not for the
        # learner (it would print on stderr under every bold title)
        logging.getLogger("matplotlib.font_manager").setLevel(logging.ERROR)
    return CJK_FAMILY
