"""Start-up of the ``scaleright`` command (issue #12 item 7): a command imports only its own module of
``scaleright.cli`` and, printing JSON, no rich; every name of ``COMMANDS`` is registered by the module it names.
(Start-up time itself is measured by ``benchmarks/cli_speed.py``, never by a timed test.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer

from scaleright.cli.main import COMMANDS, make_app


def _program_reports(code: str, tmp_path: Path, *, args: list[str] | None = None, unset: tuple[str, ...] = (),
                     user: dict[str, str | None] | None = None) -> Any:
    """The JSON ``code`` (the program run in a fresh interpreter, ``args`` JSON-encoded as its ``sys.argv[1]``)
    writes last on stderr, once it exited 0; the variables in ``unset`` are removed from its environment and those
    of ``user`` with a value set."""
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env["SCALERIGHT_CACHE_DIR"] = str(tmp_path / "cache")
    env |= {k: v for k, v in (user or {}).items() if v is not None}
    argv = [sys.executable, "-c", code, *([] if args is None else [json.dumps(args)])]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stderr.strip().splitlines()[-1])


def _modules_after(args: list[str], tmp_path) -> dict:
    code = ("import sys, json; sys.argv = ['scaleright', *json.loads(sys.argv[1])]\n"
            "from scaleright.cli.main import main\n"
            "try:\n    main()\nexcept SystemExit as e:\n    code = e.code\n"
            "sys.stderr.write(json.dumps({'code': code, 'modules': sorted(sys.modules)}))")  # fmt: skip
    return dict(_program_reports(code, tmp_path, args=args))


@pytest.mark.parametrize("args, own", [
    (["estimate", "train", "--model", "llama-3.1-8b", "--gpus", "8", "--json"], "scaleright.cli.estimate_cmd"),
    (["plan", str(Path(__file__).parents[1] / "examples" / "full-finetune-13b.yaml"), "--json"],
     "scaleright.cli.plan_cmd"),
])  # fmt: skip
def test_a_json_command_imports_its_own_module_and_no_rich(args, own, tmp_path):
    seen = _modules_after(args, tmp_path)
    assert seen["code"] in (0, None)
    cli = {m for m in seen["modules"] if m.startswith("scaleright.cli.") and m.endswith("_cmd")}
    assert cli == {own}, cli
    assert not [m for m in seen["modules"] if m == "rich" or m.startswith("rich.")]
    assert not [m for m in seen["modules"] if m == "scipy" or m.startswith("scipy.")]  # only a calibration fit


@pytest.mark.parametrize("args, other", [
    (["estimate", "train", "--model", "llama-3.1-8b", "--gpus", "8", "--json"], "scaleright.estimate.infer"),
    (["estimate", "infer", "--model", "llama-3.1-8b", "--input-len", "8", "--output-len", "8", "--json"],
     "scaleright.estimate.train"),
])  # fmt: skip
def test_an_estimate_imports_only_its_own_model(args, other, tmp_path):
    seen = _modules_after(args, tmp_path)
    assert seen["code"] in (0, None) and other not in seen["modules"]


def test_a_warm_estimate_imports_no_yaml_library(tmp_path):
    """The catalog, the systems and the collective fits come from the cache once it is written (``catalog.cache``);
    the first run parses them."""
    args = ["estimate", "train", "--model", "llama-3.1-8b", "--gpus", "8", "--zero", "3", "--json"]
    cold, warm = _modules_after(args, tmp_path), _modules_after(args, tmp_path)
    assert cold["code"] in (0, None) and warm["code"] in (0, None)
    assert "yaml" in cold["modules"] and "yaml" not in warm["modules"]


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_command_is_registered_by_the_module_it_names(name):
    group = typer.main.get_command(make_app(name))
    assert name in group.commands  # type: ignore[attr-defined]


def test_the_full_app_has_every_command_once():
    group = typer.main.get_command(make_app())
    assert sorted(group.commands) == sorted(COMMANDS)  # type: ignore[attr-defined]


_PLAN = str(Path(__file__).parents[1] / "examples" / "full-finetune-13b.yaml")


@pytest.mark.parametrize("args", [["--version"], ["plan", _PLAN, "--json"],
                                  ["estimate", "infer", "--model", "llama-2-7b", "--input-len", "8", "--output-len",
                                   "8", "--json"]])  # fmt: skip
def test_only_the_program_changes_the_collector(args, tmp_path):
    """As the program, ``main`` moves the run's objects out of the collector's reach (``gc.freeze``) before the
    interpreter exits, and a command of ``STARTUP_COMMANDS`` runs its work with the collector on (it is off only until
    the command's imports are done); called inside another program, ``main`` leaves the caller's collector alone."""
    code = ("import atexit, gc, json, sys\n"
            "atexit.register(lambda: sys.stderr.write(json.dumps([gc.isenabled(), gc.get_freeze_count(), "
            "sys.modules['__main__'].__dict__.get('on_in_work')])))\n"
            "sys.argv = ['scaleright', *json.loads(sys.argv[1])]\n"
            "import scaleright.cli.common as common\n"
            "enter = common.startup_imports\n"
            "def spy():\n"
            "    cm = enter()\n"
            "    class Spy:\n"
            "        def __enter__(self):\n"
            "            return cm.__enter__()\n"
            "        def __exit__(self, *exc):\n"
            "            out = cm.__exit__(*exc)\n"
            "            sys.modules['__main__'].on_in_work = gc.isenabled()\n"
            "            return out\n"
            "    return Spy()\n"
            "common.startup_imports = spy\n"
            "import scaleright.cli.plan_cmd, scaleright.cli.estimate_cmd\n"
            "scaleright.cli.plan_cmd.startup_imports = scaleright.cli.estimate_cmd.startup_imports = spy\n"
            "import scaleright.cli.main as cli\n"
            "CALL")  # fmt: skip
    as_program = "from scaleright.cli.main import main\nmain()"  # what the scaleright script does
    inside = "try:\n    cli.main()\nexcept SystemExit:\n    pass"  # a caller that holds no ``main`` of ours
    for call, program in ((as_program, True), (inside, False)):
        enabled, frozen, on_in_work = _program_reports(code.replace("CALL", call), tmp_path, args=args)
        assert enabled and (frozen > 0) is program, (call, enabled, frozen)
        if args[0] != "--version":  # the command's work ran with the collector on
            assert on_in_work is True, (call, on_in_work)


def _numpy_blas() -> str:
    import numpy as np

    try:
        return str(np.show_config(mode="dicts")["Build Dependencies"]["blas"]["name"])  # type: ignore[index]
    except Exception:  # an older numpy without mode="dicts"
        return "unknown"


@pytest.mark.skipif(not Path("/proc/self/task").is_dir() or (os.cpu_count() or 1) < 2 or
                    "openblas" not in _numpy_blas(), reason="counts OpenBLAS's threads in /proc/self/task: Linux, "
                    "2+ CPUs, numpy built with OpenBLAS")  # fmt: skip
@pytest.mark.parametrize("user", [None, "2"])
def test_the_program_loads_numpy_with_one_blas_thread_unless_the_user_sets_one(user, tmp_path):
    """OpenBLAS starts a spinning thread per CPU when numpy loads; plan and estimate run no BLAS routine, so as the
    program they load it with one (``begin_startup``), a user's setting kept, and leave no variable for children."""
    from scaleright.cli.common import BLAS_THREAD_VARS

    code = ("import atexit, json, os, sys\n"
            "atexit.register(lambda: sys.stderr.write(json.dumps([len(os.listdir('/proc/self/task')), "
            "os.environ.get('OPENBLAS_NUM_THREADS')])))\n"
            f"sys.argv = ['scaleright', 'plan', {_PLAN!r}, '--json']\n"
            "from scaleright.cli.main import main\n"
            "main()")  # fmt: skip
    threads, left = _program_reports(code, tmp_path, unset=BLAS_THREAD_VARS, user={"OPENBLAS_NUM_THREADS": user})
    assert left == user  # unset again (no child inherits it), or the user's own
    assert threads == (1 if user is None else int(user))


@pytest.mark.parametrize("user", [None, "logfire"])
def test_the_program_looks_for_no_pydantic_plugin_and_restores_the_setting(user, tmp_path):
    """As the program, plan and estimate build only scaleright's models: pydantic does not read every installed
    distribution's entry points for plugins (its cache stays unfilled), and ``PYDANTIC_DISABLE_PLUGINS`` is the
    user's again at exit."""
    code = ("import atexit, json, os, sys\n"
            "def report():\n"
            "    from pydantic.plugin import _loader\n"
            "    sys.stderr.write(json.dumps([_loader._plugins is None, os.environ.get('PYDANTIC_DISABLE_PLUGINS')]))\n"
            "atexit.register(report)\n"
            f"sys.argv = ['scaleright', 'plan', {_PLAN!r}, '--json']\n"
            "from scaleright.cli.main import main\n"
            "main()")  # fmt: skip
    never_searched, left = _program_reports(code, tmp_path, unset=("PYDANTIC_DISABLE_PLUGINS",),
                                            user={"PYDANTIC_DISABLE_PLUGINS": user})  # fmt: skip
    assert never_searched and left == user
