"""Package facades whose modules load on the first use of a name (``scaleright._lazy``): ``plan.economics``,
``estimate.memory`` and ``workload`` give every name of ``__all__`` as the object its module defines, list the same
names for type checkers, and import a module only when one of its names is used."""

from __future__ import annotations

import ast
import importlib
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGES = ("scaleright.plan.economics", "scaleright.estimate.memory", "scaleright.workload")


@pytest.mark.parametrize("package", PACKAGES)
def test_every_exported_name_is_its_modules_object_and_the_type_checkers_imports_agree(package):
    pkg = importlib.import_module(package)
    tree = ast.parse(Path(pkg.__file__).read_text())
    (guard,) = [n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", "") == "TYPE_CHECKING"]
    typed = {a.name: n.module.removeprefix(package + ".") for n in guard.body if isinstance(n, ast.ImportFrom)
             for a in n.names}  # fmt: skip
    eager = {a.name: n.module.removeprefix(package + ".") for n in tree.body if isinstance(n, ast.ImportFrom)
             and n.module.startswith(package + ".") for a in n.names}  # fmt: skip
    assert typed == pkg._MODULE_OF and not set(typed) & set(eager)
    assert set(typed) | set(eager) == set(pkg.__all__) and len(pkg.__all__) == len(typed) + len(eager)
    # a lazy name is no module's name: importing that module would bind the module in its place
    assert not set(typed) & {m.name for m in pkgutil.iter_modules(pkg.__path__)}
    for name, module in (typed | eager).items():
        importlib.import_module(f"{package}.{module}")  # every module imported first: nothing shadows a name
        assert getattr(pkg, name) is getattr(sys.modules[f"{package}.{module}"], name)
    assert set(pkg.__all__) <= set(dir(pkg))
    with pytest.raises(AttributeError, match=f"module '{package}' has no attribute 'not_a_name'"):
        pkg.not_a_name  # noqa: B018


def test_a_lazy_name_that_is_also_a_modules_name_is_refused():
    from scaleright._lazy import lazy_exports

    with pytest.raises(ValueError, match=r"\['spot'\] name both a module and a lazy name"):
        lazy_exports("scaleright.plan.economics", {"spot": ("spot", "spot_expected_time_h")})


@pytest.mark.parametrize(("package", "attribute", "name", "loaded"), [
    ("scaleright.plan.economics", "cost_per_job_usd", "tco_usd",  # utilisation_curve: the one eager name
     (["_validate", "utilisation_curve"], ["_validate", "job", "utilisation_curve"],
      ["_units", "_validate", "job", "ownership", "utilisation_curve"])),
    ("scaleright.estimate.memory", "GB", "kv_cache_bytes",  # and what inference.py imports
     ([], ["breakdown"], ["breakdown", "inference", "overheads", "states"])),
    ("scaleright.workload", "TransformerSpec", "kv_cache_elements", ([], ["spec"], ["kv", "spec"])),
])  # fmt: skip
def test_a_module_loads_on_the_first_use_of_one_of_its_names(package, attribute, name, loaded):
    code = (f"import sys; import {package} as p; "
            "mods = lambda: sorted(m.removeprefix(p.__name__ + '.') for m in sys.modules "
            "if m.startswith(p.__name__ + '.') and m.count('.') == p.__name__.count('.') + 1); "
            f"print(mods()); p.{attribute}; print(mods()); from {package} import {name}; print(mods())")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ}).stdout.splitlines()  # fmt: skip
    assert out == [str(x) for x in loaded], out


def test_an_inference_estimate_loads_no_training_memory_module_and_a_training_plan_no_serving_one():
    root = Path(__file__).resolve().parent.parent
    code = ("import sys; from scaleright.api import estimate_infer; "
            "estimate_infer(model='llama-2-7b', gpu='h100-sxm', input_len=512, output_len=128, batch=1); "
            "print(sorted(m for m in sys.modules if m.startswith('scaleright.estimate.memory.'))); "
            "from scaleright.plan.planner import plan; from scaleright.plan.scenario import load_scenario; "
            f"plan(load_scenario({str(root / 'examples' / 'full-finetune-13b.yaml')!r})); "
            "print(sorted(m for m in sys.modules if m in ('scaleright.plan.serving', 'scaleright.estimate.infer')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ}).stdout.splitlines()  # fmt: skip
    memory = eval(out[0])
    assert not {"scaleright.estimate.memory.training", "scaleright.estimate.memory.profiles"} & set(memory), memory
    assert "scaleright.estimate.memory.inference" in memory
    assert eval(out[1]) == ["scaleright.estimate.infer"], out  # loaded by the inference estimate only
