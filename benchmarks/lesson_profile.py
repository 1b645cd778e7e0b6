"""Where a lesson's seconds go: what ``bench_lessons.py`` runs in the kernel to find out.

:data:`SETUP` is executed in the lesson's kernel before its first cell (it is not part of the
lesson). It times, exclusively (the outermost timed call owns the time), the categories of
:data:`CATEGORIES`:

- ``imports``: every outermost ``import`` statement's time (``builtins.__import__``);
- ``cluster start``: ``Cluster._start`` (forking the ranks and joining the process group);
- ``runs``: ``Cluster.run`` and ``TorchrunExecutor.run`` (a job on the ranks, round trip);
- ``rendering``: IPython's display formatter (plotly, pandas, matplotlib's inline figures,
  widgets) and ``plotly.io.show``.

It also counts the progress bars (``tqdm``) each cell shows. Whatever a cell spends outside
the categories is "other" (Python in the kernel: models, planners, building figures). After each
cell (this one included) a ``post_run_cell`` hook takes a snapshot; :data:`REPORT` prints the
snapshots as JSON for the benchmark to read.
"""

from __future__ import annotations

CATEGORIES = ("imports", "cluster start", "runs", "rendering")

SETUP = r"""
def _edu_profile():
    import builtins, functools, sys, time
    totals = dict.fromkeys(CATEGORIES_HERE, 0.0)
    totals["bars"] = 0
    active = [False]
    state = {}
    snaps = []

    def timed(category, fn):
        @functools.wraps(fn)
        def wrapper(*a, **k):
            if active[0]:
                return fn(*a, **k)
            active[0] = True
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                totals[category] += time.perf_counter() - t0
                active[0] = False
        return wrapper

    plain_import = timed("imports", builtins.__import__)
    shell = get_ipython()
    fmt = shell.display_formatter
    fmt.format = timed("rendering", fmt.format)

    def patch_engine():
        state["engine"] = True
        C = sys.modules["edu_parallel.engine.cluster"].Cluster
        C._start = timed("cluster start", C._start)
        C.run = timed("runs", C.run)

    def patch_torchrun():
        state["torchrun"] = True
        T = sys.modules["edu_parallel.engine.torchrun"].TorchrunExecutor
        T.run = timed("runs", T.run)

    def patch_plotly():  # only once plotly's renderers are loaded: patching loads nothing
        renderers = sys.modules["plotly.io._renderers"]  # where plotly.io.show lives
        if hasattr(renderers, "show"):  # not while it is still initialising
            state["plotly"] = True
            renderers.show = timed("rendering", renderers.show)

    def patch_tqdm():  # count the progress bars a cell shows (tqdm.auto's bars subclass this)
        state["tqdm"] = True
        bar = sys.modules["tqdm.std"].tqdm
        plain_init = bar.__init__

        @functools.wraps(plain_init)
        def counting(self, *a, **k):
            totals["bars"] += 1
            return plain_init(self, *a, **k)

        bar.__init__ = counting

    patches = {
        "tqdm": ("tqdm.std", patch_tqdm),
        "engine": ("edu_parallel.engine.cluster", patch_engine),
        "torchrun": ("edu_parallel.engine.torchrun", patch_torchrun),
        "plotly": ("plotly.io._renderers", patch_plotly),
    }

    depth = [0]

    def importing(*a, **k):
        depth[0] += 1
        try:
            module = plain_import(*a, **k)
        finally:
            depth[0] -= 1
        if depth[0]:  # a module is still initialising: patch once the outermost import is done
            return module
        for key, (name, patch) in patches.items():
            if not state.get(key) and name in sys.modules:
                patch()
        return module

    builtins.__import__ = importing

    def post(*_):
        snaps.append(dict(totals))

    shell.events.register("post_run_cell", post)
    return snaps

_edu_profile_snaps = _edu_profile()
del _edu_profile
""".replace("CATEGORIES_HERE", repr(CATEGORIES))

REPORT = "import json as _j; print(_j.dumps(_edu_profile_snaps)); del _j"
