"""One course notebook executed top to bottom for the site: nbclient with a kernel of this Python,
each widget view probed for what it showed (``probe.py``), a failure told in one line.

Reference: nbclient (https://nbclient.readthedocs.io/en/latest/client.html).
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from ...core.workspace import WORKSPACE_VAR
from .html import WIDGET_VIEW
from .probe import MIMETYPE

KERNEL = "python3"


class LessonFailed(Exception):
    """A lesson raised or timed out; the message is one line (lesson, cell, error)."""


def _client_class() -> type:
    """A NotebookClient that asks the kernel about each widget view a cell displays."""
    import nbformat
    from nbclient import NotebookClient

    class ExportClient(NotebookClient):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            # nbclient mirrors every ipywidgets Output back to the kernel, and with a figure of
            # more than ~100 KB in one it waits out the cell timeout; the views are probed below.
            self.widget_registry = {}
            self.views: dict[str, Any] = {}
            self.current: Any = None

        async def async_execute_cell(
            self, cell: Any, cell_index: int, execution_count: Any = None, store_history=True
        ) -> Any:
            self.current = cell
            cell = await super().async_execute_cell(
                cell, cell_index, execution_count, store_history
            )
            ids = [
                o.data[WIDGET_VIEW]["model_id"]
                for o in cell.get("outputs", [])
                if WIDGET_VIEW in o.get("data", {})
            ]
            if ids and cell.cell_type == "code":
                code = (
                    "__import__('edu_parallel.app.export.probe', fromlist=['_'])"
                    f".publish_offline_views({ids!r}, {cell.get('execution_count')!r})"
                )
                probe = nbformat.v4.new_code_cell(code, metadata={"tags": ["raises-exception"]})
                await super().async_execute_cell(probe, cell_index, store_history=False)
                self.nb.cells[cell_index] = cell  # the probe took its place
                for out in probe.outputs:
                    self.views.update(out.get("data", {}).get(MIMETYPE, {}))
            return cell

    return ExportClient


def _first_line(cell: Any) -> str:
    lines = [line for line in str(getattr(cell, "source", "")).splitlines() if line.strip()]
    return lines[0].strip()[:80] if lines else "(empty)"


def execute_lesson(path: Path, timeout_s: float) -> tuple[Any, dict[str, Any]]:
    """Run the lesson at ``path`` in its folder; return the executed notebook and widget views.

    The kernel's own log (not the lesson's output) goes to ``path`` + ``.log``: its last line
    explains a kernel that died."""
    import nbformat
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    nb = nbformat.read(path, as_version=4)
    client = _client_class()(
        nb,
        timeout=max(1, math.ceil(timeout_s)),
        kernel_name=KERNEL,
        resources={"metadata": {"path": str(path.parent)}},
    )
    env = dict(os.environ, **{WORKSPACE_VAR: str(path.parent)})  # progress lands in the copy
    log = path.with_suffix(".log")
    try:
        with log.open("w") as kernel_log:
            client.execute(env=env, stderr=kernel_log)
    except CellExecutionError as exc:
        error = f"{exc.ename}: {' '.join(str(exc.evalue).split())}"
        raise LessonFailed(_failure(path, client.current, error)) from None
    except CellTimeoutError:
        error = f"no result after {timeout_s:g} s (raise --timeout)"
        raise LessonFailed(_failure(path, client.current, error)) from None
    except DeadKernelError:
        last = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
        error = "the kernel died" + (f" ({last[-1].strip()})" if last else "")
        raise LessonFailed(_failure(path, client.current, error)) from None
    return nb, client.views


def _failure(path: Path, cell: Any, error: str) -> str:
    error = error if len(error) <= 300 else error[:297] + "..."
    return f"lesson {path.stem} failed in the cell `{_first_line(cell)}`: {error}"
