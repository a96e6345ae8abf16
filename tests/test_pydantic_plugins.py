"""scaleright builds its models without pydantic plugins, and a caller's plugins still load for the caller's models.

The end-to-end check runs in a fresh interpreter (pydantic loads plugins once per process) with a plugin installed
the way a real one is: a distribution's ``entry_points.txt`` in the group ``pydantic`` on ``sys.path``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from scaleright.pydantic_plugins import VAR, no_plugins

SRC = Path(__file__).resolve().parents[1] / "src"


@pytest.mark.parametrize("callers", [None, "", "logfire", "__all__"])
def test_the_callers_setting_is_restored(monkeypatch: pytest.MonkeyPatch, callers: str | None) -> None:
    if callers is None:
        monkeypatch.delenv(VAR, raising=False)
    else:
        monkeypatch.setenv(VAR, callers)
    with no_plugins():
        assert os.environ[VAR] == "__all__"
        with no_plugins():
            assert os.environ[VAR] == "__all__"
        assert os.environ[VAR] == "__all__"  # the outer window is still open
    assert os.environ.get(VAR) == callers


def test_restored_after_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(VAR, "some-plugin")
    with pytest.raises(ZeroDivisionError), no_plugins():
        1 / 0  # noqa: B018
    assert os.environ[VAR] == "some-plugin"


def test_windows_overlapping_in_threads_restore_the_callers_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    """Thread A opens, thread B opens, A closes, B closes: B must not restore A's "__all__"."""
    monkeypatch.delenv(VAR, raising=False)
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()

    def a() -> None:
        with no_plugins():
            a_in.set()
            b_in.wait(5)
        a_out.set()

    def b() -> None:
        a_in.wait(5)
        with no_plugins():
            b_in.set()
            a_out.wait(5)
            assert os.environ[VAR] == "__all__"  # A closed, B's window is still open

    ts = [threading.Thread(target=a), threading.Thread(target=b)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(10)
    assert VAR not in os.environ


_PLUGIN = '''
import json, os
built = []

class _Plugin:
    def new_schema_validator(self, schema, schema_type, schema_type_path, schema_kind, config, plugin_settings):
        built.append(getattr(schema_type, "__name__", str(schema_type)))
        return None, None, None

plugin = _Plugin()
'''

_SCRIPT = '''
import json, sys
from pydantic import BaseModel
from scaleright.results import result_model

from pydantic import ValidationError

schema = result_model("memory").json_schema()  # builds MemoryResult (deferred to first use)
try:
    result_model("train").from_dict({})  # builds TrainResult, then refuses the empty dict
except ValidationError:
    pass
loaded_during_scaleright = "fakeplugin" in sys.modules

class Mine(BaseModel):  # the caller's model, built after
    x: int

import fakeplugin
print(json.dumps({"loaded_during_scaleright": loaded_during_scaleright, "built": fakeplugin.built,
                  "schema_title": schema["title"]}))
'''


def test_a_callers_plugin_loads_after_scaleright_built_its_models(tmp_path: Path) -> None:
    (tmp_path / "fakeplugin.py").write_text(_PLUGIN)
    dist = tmp_path / "fake_pydantic_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-pydantic-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[pydantic]\nfake = fakeplugin:plugin\n")
    env = {k: v for k, v in os.environ.items() if k != VAR}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(SRC)])
    out = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["schema_title"] == "MemoryResult"
    assert not got["loaded_during_scaleright"]  # no plugin search while scaleright built its model
    assert "Mine" in got["built"]  # the caller's model got the caller's plugin
    assert not any(name.endswith("Result") for name in got["built"])  # scaleright's did not
