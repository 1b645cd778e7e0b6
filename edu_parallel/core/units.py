"""Sizes and dtypes as a learner types them: ``4096``, ``1KiB``, ``1MiB``, ``float32``."""

from __future__ import annotations

import re

from .errors import bad_value, one_of

# Binary (IEC) and decimal (SI) suffixes, lower case; nccl-tests reports sizes in bytes and
# bandwidth in GB/s (1e9). The quizzes read byte answers with the same table.
BYTE_SUFFIXES = {
    "": 1,
    "b": 1,
    "byte": 1,
    "bytes": 1,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "k": 1024,
    "m": 1024**2,
    "g": 1024**3,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
}

KIB, MIB, GIB = 1024, 1024**2, 1024**3  # the binary units, one home
MAX_SIZE = 1024**3  # 1 GiB per rank: more than any lesson needs, less than a laptop's memory
SIZE_RANGE = "a byte count > 0 and <= 1GiB, such as 4096, 64KiB, 1MiB"

# name -> bytes per element; torch dtypes are looked up lazily so renderers never import torch.
DTYPES = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "int32": 4, "int64": 8}
INTEGER_DTYPES = {"int32", "int64"}


def parse_size(text: str | int, name: str = "size") -> int:
    """``"1MiB"`` -> 1048576. Raises a ValueError naming ``name`` for anything else."""
    if isinstance(text, bool):
        raise bad_value(name, text, SIZE_RANGE)
    if isinstance(text, int):
        value = text
    else:
        match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", str(text))
        if not match or match.group(2).lower() not in BYTE_SUFFIXES:
            raise bad_value(name, text, SIZE_RANGE)
        value = float(match.group(1)) * BYTE_SUFFIXES[match.group(2).lower()]
        if not value <= MAX_SIZE:  # also inf, from a number of hundreds of digits
            raise bad_value(name, text, SIZE_RANGE)
        if value != int(value):
            raise bad_value(name, text, SIZE_RANGE + " (a whole number of bytes)")
        value = int(value)
    if value <= 0 or value > MAX_SIZE:
        raise bad_value(name, text, SIZE_RANGE)
    return value


def format_bytes(n: float) -> str:
    """1536 -> '1.5 KiB'."""
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.4g} {unit}"
        n /= 1024
    return f"{n:.4g} GiB"  # pragma: no cover - loop always returns


def check_dtype(name: str) -> str:
    """Return the canonical dtype name or raise a ValueError listing the valid ones."""
    if name not in DTYPES:
        raise bad_value("dtype", name, one_of(DTYPES))
    return name


def torch_dtype(name: str):
    """The torch dtype for a name from :data:`DTYPES` (imports torch lazily)."""
    import torch

    return getattr(torch, check_dtype(name))
