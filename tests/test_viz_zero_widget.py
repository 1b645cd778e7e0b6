"""ZeRO memory renderers fed by the calculator: the static bars and the explorer widget; and
every ZeRO renderer loads without torch."""

from __future__ import annotations

import html
import re
from dataclasses import FrozenInstanceError, replace
from types import SimpleNamespace

import pytest
from helpers import fresh_python

from edu_parallel.viz.zero import memory_bars


# ----------------------------------------------------------------- static bars
def test_static_bars_equal_the_breakdown():
    gib = 1024**3
    estimates = {
        "DP": SimpleNamespace(
            breakdown={
                "param16": 2 * gib,
                "grad16": 2 * gib,
                "master32": 4 * gib,
                "adam_m": 4 * gib,
                "adam_v": 4 * gib,
            }
        ),
        "ZeRO-1": SimpleNamespace(
            breakdown={
                "param16": 2 * gib,
                "grad16": 2 * gib,
                "master32": gib,
                "adam_m": gib,
                "adam_v": gib,
            }
        ),
        "ZeRO-3": {
            "param16": gib // 2,
            "grad16": gib // 2,
            "master32": gib,
            "adam_m": gib,
            "adam_v": gib,
            "activations": gib,
        },
    }
    fig = memory_bars(estimates)
    ax = fig.axes[0]
    assert ax.get_ylabel() == "GiB per GPU"
    got = {c.get_label(): [p.get_height() for p in c.patches] for c in ax.containers}
    assert got["bf16 parameters"] == [2, 2, 0.5]
    assert got["Adam v (fp32)"] == [4, 1, 1]
    assert got["activations"] == [0, 0, 1]
    tops = {}
    for c in ax.containers:
        for x, p in enumerate(c.patches):
            tops[x] = max(tops.get(x, 0), p.get_y() + p.get_height())
    assert tops == {0: 16, 1: 7, 2: 5}
    assert [t.get_text() for t in ax.get_xticklabels()] == ["DP", "ZeRO-1", "ZeRO-3"]
    assert fig._repr_png_()[0][:4] == b"\x89PNG"
    with pytest.raises(ValueError, match="estimates"):
        memory_bars({})
    with pytest.raises(ValueError, match=r"estimates\['x'\]"):
        memory_bars({"x": 3})


# ----------------------------------------------------------------- no torch
def test_zero_renderers_import_no_torch():
    code = (
        "import sys\n"
        "from edu_parallel.viz.memory_ledger import ledger\n"
        "import edu_parallel.viz.zero as z\n"
        "assert not {'torch', 'plotly', 'matplotlib', 'ipywidgets'} & set(sys.modules)\n"
        "from edu_parallel.core.trace import Event, Trace\n"
        "ev = [Event(kind='memory', rank=0, op='alloc', nbytes=8, start=1, end=1, step=0,\n"
        "            attrs={'category': 'gathered_params'}),\n"
        "      Event(kind='memory', rank=0, op='free', nbytes=-8, start=2, end=2, step=0,\n"
        "            attrs={'category': 'gathered_params'})]\n"
        "t = Trace(events=ev)\n"
        "ledger(t); z.memory_bars_animation({'a': t, 'b': t})\n"
        "z.memory_bars({'a': {'param16': 4}})\n"
    )
    fresh_python(code)


# ----------------------------------------------------------------- widget
def test_zero_state_validates_every_field_by_the_calculators_rules():
    from edu_parallel.memory.model_states import model_state_bytes
    from edu_parallel.viz.zero_widget import ZeroState

    s = ZeroState("gpt2-1.5b", 8, 2, "mixed", "none", 40)
    assert s.params > 1e9 and s.gpu_bytes == 40 * 1024**3
    for field_, value, match in [
        ("gpus", 0, r"gpus=0 is not valid: expected an integer >= 1"),
        ("stage", 4, r"stage=4 is not valid: expected an integer in \[0, 3\]"),
        ("precision", "fp8", r"precision='fp8' is not valid: expected one of 'mixed'"),
        ("offload", "disk", r"offload='disk' is not valid: expected one of 'none'"),
        ("offload", "all", r"offload='all' .*expected one of 'none', 'optimizer' with stage=2"),
        ("gpu_gib", 0, r"gpu_gib=0 is not valid: expected a finite number > 0"),
        ("model", "gpt5", r"model='gpt5' is not valid: expected one of 'gpt2-1.5b'"),
        ("model", -3, r"model=-3 is not valid: expected a finite number > 0"),
    ]:
        with pytest.raises(ValueError, match=match):
            replace(s, **{field_: value})
    with pytest.raises(ValueError) as calculator:  # the calculator's own rule, in its words
        model_state_bytes(1e9, 0)
    with pytest.raises(ValueError, match=re.escape(str(calculator.value))):
        replace(s, gpus=0)
    with pytest.raises(ValueError, match=r"^gpus=0 .*; gpu_gib=-1 "):  # every bad field at once
        replace(s, gpus=0, gpu_gib=-1)
    with pytest.raises(FrozenInstanceError):
        s.gpus = 4  # a state changes only through dataclasses.replace, which checks it
    assert (s.gpus, s.stage, s.offload, s.gpu_gib) == (8, 2, "none", 40)
    assert replace(s, offload="optimizer").offload == "optimizer"
    with pytest.raises(
        ValueError, match=r"offload='optimizer' is not valid: expected one of 'none' with stage=0"
    ):
        replace(s, offload="optimizer", stage=0)
    with pytest.raises(ValueError, match="gpus=2.5"):
        ZeroState(gpus=2.5)
    assert ZeroState(model="1e9").params == 1e9


def test_zero_widget_outputs_come_from_the_calculator():
    from edu_parallel.memory.communication import comm_bytes_per_step
    from edu_parallel.memory.model_states import largest_model_that_fits, model_state_bytes
    from edu_parallel.viz.zero_widget import ZeroWidget

    w = ZeroWidget(model=7.5e9, gpus=64, stage=1, precision="mixed", offload="none", gpu_gib=32)
    want = model_state_bytes(7.5e9, 64, 1, "mixed", "none")
    assert w.estimate.bytes_per_gpu == want.bytes_per_gpu == 4 * 7.5e9 + 12 * 7.5e9 / 64
    assert w.fits is True  # 31.4 GB < 32 GiB
    assert w.largest == largest_model_that_fits(32 * 1024**3, 64, 1, "mixed", "none")
    assert w.comm.bytes_per_gpu == comm_bytes_per_step(7.5e9, 64, 1, "mixed")
    assert list(w.compare) == ["DP", "ZeRO-1", "ZeRO-2", "ZeRO-3"]
    assert "does not fit" not in w.summary.value and "fits" in w.summary.value
    assert f"{w.largest:,}" in w.summary.value
    # The bar chart is the calculator's breakdown of every stage, with the GPU line.
    ax = w.figure.axes[0]
    got = {c.get_label(): [p.get_height() for p in c.patches] for c in ax.containers}
    gib = 1024**3
    for k in range(4):
        est = model_state_bytes(7.5e9, 64, k, "mixed", "none")
        assert got["Adam m (fp32)"][k] == pytest.approx(est.breakdown["adam_m"] / gib)
        assert got["bf16 parameters"][k] == pytest.approx(est.breakdown["param16"] / gib)
    assert ax.lines[0].get_ydata()[0] == pytest.approx(32)
    # Change controls: DP does not fit; offload limits the stages compared.
    w.stage_buttons.value = 0
    assert w.state.stage == 0 and w.fits is False and "does not fit" in w.summary.value
    w.stage_buttons.value = 3
    w.offload_dropdown.value = "all"
    assert list(w.compare) == ["ZeRO-3"] and w.estimate.cpu_bytes_per_gpu > 0
    assert "CPU memory per GPU" in w.summary.value
    # A bad combination is reported and the last valid state kept.
    w.stage_buttons.value = 1
    assert "offload='all' is not valid" in w.status.value and "stage=1" in w.status.value
    assert w.state.stage == 3
    w.offload_dropdown.value = "none"
    assert w.status.value == "" and w.state.stage == 1
    w.model_dropdown.value = "llama3-8b"
    assert w.params_box.disabled and w.estimate.params == w.state.params
    w.gpus_box.value = 0  # a bad control: the config's message, and the last valid state kept
    with pytest.raises(ValueError) as bad:
        replace(w.state, gpus=0)
    assert html.escape(str(bad.value), quote=False) in w.status.value
    assert "gpus=0 is not valid" in w.status.value and w.state.gpus == 64
