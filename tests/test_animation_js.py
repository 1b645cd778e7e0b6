"""The script that keeps pausing an animation out of the console (``app/animation_js.py``) is
where the lab and the offline site load it from. Chromium's part, that a pause raises a page
error without it and none with it, is in ``test_lab_checks_animation.py``."""

from __future__ import annotations

import hashlib
from pathlib import Path

from edu_parallel.app import animation_js
from edu_parallel.app.lab import lab_command


def test_the_scripts_name_carries_its_hash_as_jupyterlab_serves_it_immutable():
    path = animation_js.script_path()
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:12]
    assert path.name == f"remoteEntry.{digest}.js", "a changed script needs its new hash as name"
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no stale copy beside it


def test_the_lab_loads_it_as_a_federated_extension():
    from jupyterlab_server.config import get_page_config

    cmd = lab_command(Path("/tmp/x"))
    assert f"--LabApp.extra_labextensions_path={animation_js.LABEXTENSIONS}" in cmd
    config = get_page_config([str(animation_js.LABEXTENSIONS)], app_settings_dir=None)
    listed = [e for e in config["federated_extensions"] if e["name"] == animation_js.NAME]
    assert listed == [
        {
            "name": animation_js.NAME,
            "load": str(animation_js.script_path().relative_to(animation_js.EXTENSION)),
            "extension": "./extension",
            "entrypoints": None,
        }
    ]
    text = animation_js.script()
    assert f'var name = "{animation_js.NAME}"' in text and "_JUPYTERLAB[name]" in text


def test_every_page_of_the_site_inlines_it():
    import nbformat

    from edu_parallel.app.export.html import render_page

    page = render_page(nbformat.v4.new_notebook(), "lesson")
    assert f"<script>{animation_js.script()}</script>" in page
