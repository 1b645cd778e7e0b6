"""Output paths checked before anything runs, so a long run is never lost to a bad path.

:func:`check_output_file` returns the path a command will write, or raises a one-line ValueError
naming the option: an empty path, a folder, a missing or unwritable folder, (for pictures) a
suffix matplotlib cannot write, or a file the system refuses to create (``/proc``, ``/sys``): the
file is created and removed up front, since a folder that passes ``os.access`` may still refuse
it. :func:`check_output_folder` does the same for a folder a command fills. What only writing can
tell (``/dev/full``: no space left) is caught by :func:`writing`, which turns the ``OSError`` into
the same kind of line; the commands print their result before they write, so it is not lost.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
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
    if not os.access(folder, os.W_OK):
        raise read_only(option, text, folder)
    try:
        probe(out)
    except PermissionError as err:  # an existing file: read-only; a new one: the system's word
        raise (
            read_only(option, text, folder) if out.exists() else refused(option, text, err)
        ) from None
    except OSError as err:
        raise refused(option, text, err) from None
    return out


def check_output_folder(path: str | os.PathLike[str], option: str) -> Path:
    """``path`` as a folder this process can fill: existing, or creatable with its parents. The
    folders it lacks are created, a file is created and removed in it, and what was created here
    is removed again, so a check leaves nothing behind."""
    text = os.fspath(path)
    if not text.strip():
        raise bad_value(option, text, _("a folder name, such as site"))
    folder = Path(text).expanduser()
    if folder.exists() and not folder.is_dir():
        raise bad_value(option, text, _("a folder ({folder} is a file)").format(folder=folder))
    missing = []
    for parent in (folder, *folder.parents):
        if parent.exists():
            break
        missing.append(parent)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".edu-parallel-probe-{os.getpid()}"
        probe.open("xb").close()
        probe.unlink()
    except OSError as err:
        raise refused(option, text, err) from None
    finally:
        for made in missing:  # innermost first
            with contextlib.suppress(OSError):
                made.rmdir()
    return folder


def probe(out: Path, tries: int = 3) -> None:
    """Raise the ``OSError`` the system gives for writing ``out``, without changing it: an
    existing file is opened for writing (not truncated; a FIFO without a reader does not block);
    a missing one is created and removed. A file made or removed meanwhile by another process (a
    torchrun rank probing the same path) is looked at again, never refused nor removed."""
    for _try in range(tries):
        try:
            os.close(os.open(out, os.O_WRONLY | os.O_NONBLOCK))
            return
        except FileNotFoundError:
            pass
        except OSError as err:
            if err.errno != errno.ENXIO:  # ENXIO: a FIFO with no reader yet, which is writable
                raise
            return
        try:  # the system has the last word on creating it (/proc, /sys, a full disk)
            out.open("xb").close()
        except FileExistsError:
            continue
        out.unlink(missing_ok=True)
        return


def read_only(option: str, text: str, folder: Path) -> ValueError:
    """The one line for a file, or its folder, that this user may not write."""
    return bad_value(
        option, text, _("a file this user may write ({folder} is read-only)").format(folder=folder)
    )


def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Whether two output paths name one file (after ``~``, ``..`` and links)."""
    return Path(a).expanduser().resolve() == Path(b).expanduser().resolve()


def refused(option: str, text: str, err: OSError) -> ValueError:
    """The one line for a path the system refused: the option, the path and the system's reason."""
    reason = err.strerror or type(err).__name__
    return bad_value(
        option, text, _("a path this system lets us write ({reason})").format(reason=reason)
    )


@contextlib.contextmanager
def writing(option: str, path: str | os.PathLike[str]) -> Iterator[None]:
    """Turn an ``OSError`` raised while writing ``path`` (given as ``option``) into one line."""
    try:
        yield
    except OSError as err:
        raise bad_value(
            option,
            os.fspath(path),
            _("a path this system lets us write (writing failed: {reason})").format(
                reason=err.strerror or type(err).__name__
            ),
        ) from None
