"""How fast the ``scaleright`` command answers, side by side with llm-analysis's command line (issue #12, item 7).

Each command runs ``--repeat`` times (at least 5) as a fresh process, ``python -m scaleright ...``, output to
/dev/null; the median wall time is reported, with the median CPU time (user + system) of the child, which a shared
machine's load inflates less. The workload is the same for both tools where both can express it: Llama-2 7B on
8 H100 SXM, ZeRO-3, full recomputation, micro-batch 1, sequence 4096 (train); Llama-2 7B on one H100 SXM, prompt
512, 128 generated tokens, batch 1 (infer). Both print JSON (``--json`` here; llm-analysis's fire CLI prints its
summary dict as JSON); scaleright's tables cost the import of rich on top. ``plan`` runs
``examples/full-finetune-13b.yaml --json`` (a search over every catalog GPU; llm-analysis has no planner).

Both tools run as an installed package does: compiled bytecode present (``PYTHONDONTWRITEBYTECODE`` is removed and
``PYTHONPYCACHEPREFIX`` points at a scratch directory; the first, unmeasured run of each command writes it), and
scaleright's catalog cache warm (``SCALERIGHT_CACHE_DIR`` in the same scratch directory). The first runs are
reported too, as ``cold``: no bytecode, no catalog cache. llm-analysis (PyPI ``llm-analysis`` 0.2.2, a fire CLI:
``python -m llm_analysis.analysis train|infer``) is not a dependency; give its interpreter with
``--llm-analysis-python`` (e.g. a venv: ``python -m venv /tmp/llmavenv && /tmp/llmavenv/bin/pip install
llm-analysis``); without it its column is skipped.

``--baseline DIR`` also runs another checkout of scaleright (its repository root, e.g. ``git worktree add
/tmp/base main`` or ``git archive``), command by command, its runs interleaved with this tree's so both meet the same
load: a before/after from one run, with the ratio of the medians. The machine's load average is printed at the start
and the end; on a shared machine the CPU column and the ratios move less than the wall times. ``--instructions`` adds
what load does not move at all: the instructions each scaleright command executes (one warm run under valgrind's
callgrind, its "Collected" count, BLAS on one thread; valgrind must be installed; about 15-30 s per command).

It also times the floor under every command, a fresh interpreter that only imports what the command stands on
(numpy, pydantic with its first validator, typer, and PyYAML for ``plan``): scaleright's own share is the command
minus its floor. The floor's validator pays pydantic's plugin search, which the commands skip (``begin_startup``), so
the floor sits that search (a few ms: 6.6 ms in 11 interleaved runs here) above what they can reach and their own
share reads that much low.

Last line: ``help_s=<median> estimate_s=<median of train and infer> plan_s=<median> llm_analysis_s=<median of its
train and infer, or nan> floor_estimate_s=<median> floor_plan_s=<median>`` (wall seconds). Target (issue #12):
``estimate`` and ``plan`` start in <= 0.25 s.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

TRAIN = ["--model", "llama-2-7b", "--gpu", "h100-sxm", "--gpus", "8", "--zero", "3", "--recompute", "full",
         "--micro-batch", "1", "--seq-len", "4096"]  # fmt: skip
INFER = ["--model", "llama-2-7b", "--gpu", "h100-sxm", "--input-len", "512", "--output-len", "128", "--batch", "1"]
SCALERIGHT = {
    "help": ["--help"],
    "estimate train": ["estimate", "train", *TRAIN, "--json"],
    "estimate infer": ["estimate", "infer", *INFER, "--json"],
    "plan": ["plan", str(ROOT / "examples" / "full-finetune-13b.yaml"), "--json"],
}
LLM_ANALYSIS = {
    "help": ["--help"],
    "estimate train": ["train", "--model_name", "NousResearch_Llama-2-7b-hf", "--gpu_name", "h100-sxm-80gb",
                       "--total_num_gpus", "8", "--ds_zero", "3", "--activation_recomputation", "2",
                       "--batch_size_per_gpu", "1", "--seq_len", "4096", "--log_level", "ERROR"],
    "estimate infer": ["infer", "--model_name", "NousResearch_Llama-2-7b-hf", "--gpu_name", "h100-sxm-80gb",
                       "--seq_len", "512", "--num_tokens_to_generate", "128", "--batch_size_per_gpu", "1",
                       "--log_level", "ERROR"],
}  # fmt: skip
# What no change to scaleright's own code can go below: a fresh interpreter that only imports the libraries each
# command stands on (numpy for the physics, pydantic for the typed results and scenario, typer for the command line,
# PyYAML for a scenario file) and builds one pydantic validator (its first costs the plugin lookup, which the
# commands skip: see the docstring), timed like the commands, with the same bytecode cache, and loaded as ``plan`` and
# ``estimate`` load them (``cli.common.begin_startup``: no cyclic garbage collector, one BLAS thread).
_AS_STARTUP = "import gc, os\ngc.disable()\nos.environ.setdefault('OPENBLAS_NUM_THREADS', '1')\n"
_PYDANTIC = "from pydantic import BaseModel, TypeAdapter\nTypeAdapter(int)"
FLOORS = {
    "python": "pass",
    "estimate floor": _AS_STARTUP + "import numpy, typer\n" + _PYDANTIC,
    "plan floor": _AS_STARTUP + "import numpy, typer, yaml\n" + _PYDANTIC,
}


def _run(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall s, child CPU s) of one run; a failing command stops the benchmark with its stderr."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"error: {' '.join(argv[:6])} ... exited {proc.returncode}: {proc.stderr.strip()[-300:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def _measure(argv: list[str], env: dict[str, str], repeat: int) -> dict[str, float]:
    return _interleaved({"": (argv, env)}, repeat)[""]


def _interleaved(tools: dict[str, tuple[list[str], dict[str, str]]], repeat: int) -> dict[str, dict[str, float]]:
    """Each tool's first run (cold: it writes bytecode and scaleright's catalog cache), then ``repeat`` rounds that
    run every tool once in turn (so each meets the same load); medians of the rounds."""
    cold = {name: _run(argv, env)[0] for name, (argv, env) in tools.items()}
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in tools}
    for _ in range(repeat):
        for name, (argv, env) in tools.items():
            runs[name].append(_run(argv, env))
    return {name: {"cold": cold[name], "wall": statistics.median(w for w, _ in r),
                   "cpu": statistics.median(c for _, c in r)} for name, r in runs.items()}  # fmt: skip


def _instructions(argv: list[str], env: dict[str, str]) -> int:
    """Instructions one warm run of ``argv`` executes (callgrind's "Collected" count, every thread). BLAS runs one
    thread: OpenBLAS's idle workers spin, which adds a varying count (±2 % on ``plan``) that is not the command's work;
    with one thread two runs agree within 0.1 %."""
    env = env | {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv], env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False)  # fmt: skip
    found = [line.split()[-1] for line in proc.stderr.splitlines() if "Collected :" in line]
    if proc.returncode != 0 or not found:
        sys.exit(f"error: valgrind {' '.join(argv[:6])} ... exited {proc.returncode}: {proc.stderr.strip()[-300:]}")
    return int(found[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7, help="measured runs per command (at least 5); the median counts")
    ap.add_argument("--llm-analysis-python", default=None,
                    help="interpreter that has llm-analysis installed (e.g. /tmp/llmavenv/bin/python)")
    ap.add_argument("--baseline", type=Path, default=None,
                    help="another checkout of scaleright (repository root) to measure beside this one, interleaved")
    ap.add_argument("--instructions", action="store_true",
                    help="also count the instructions of each scaleright command under valgrind (load-independent)")
    args = ap.parse_args()
    if args.instructions and shutil.which("valgrind") is None:
        ap.error("--instructions: valgrind not found on PATH")
    if args.repeat < 5:
        ap.error("--repeat: at least 5")
    la_python = args.llm_analysis_python
    if la_python is not None and subprocess.run([la_python, "-c", "import llm_analysis"], capture_output=True,
                                                 check=False).returncode != 0:  # fmt: skip
        ap.error(f"--llm-analysis-python {la_python}: cannot import llm_analysis there")
    base = args.baseline.resolve() if args.baseline is not None else None
    if base is not None and not (base / "src" / "scaleright" / "__main__.py").is_file():
        ap.error(f"--baseline {base}: no src/scaleright/__main__.py there (give a checkout's repository root)")
    load_start = os.getloadavg()[0]

    scratch = Path(tempfile.mkdtemp(prefix="cli-speed-"))
    try:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "SCALERIGHT_NO_CACHE")}
        rest = env.get("PYTHONPATH")

        def tree_env(root: Path, tag: str) -> dict[str, str]:  # own bytecode and cache per tree
            return env | {"PYTHONPYCACHEPREFIX": str(scratch / tag / "pyc"),
                          "SCALERIGHT_CACHE_DIR": str(scratch / tag / "cache"),
                          "PYTHONPATH": os.pathsep.join(p for p in (str(root / "src"), rest) if p)}  # fmt: skip

        ours: dict[str, dict[str, float]] = {}
        before: dict[str, dict[str, float]] = {}
        counts: dict[str, dict[str, int]] = {}
        for name, a in SCALERIGHT.items():
            argv = [sys.executable, "-m", "scaleright", *a]
            tools = {"ours": (argv, tree_env(ROOT, "ours"))}
            if base is not None:  # the same argv: the example path is this tree's, read by both
                tools["base"] = (argv, tree_env(base, "base"))
            got = _interleaved(tools, args.repeat)
            ours[name] = got["ours"]
            if base is not None:
                before[name] = got["base"]
            if args.instructions:  # after the timed runs: bytecode and cache are warm
                counts[name] = {tag: _instructions(argv, e) for tag, (argv, e) in tools.items()}
        floors = {name: _measure([sys.executable, "-c", code], tree_env(ROOT, "floor"), args.repeat)
                  for name, code in FLOORS.items()}  # fmt: skip
        theirs: dict[str, dict[str, float]] = {}
        if la_python is not None:
            la_env = {k: v for k, v in env.items() if k != "PYTHONPATH"} | {"PYTHONPYCACHEPREFIX": str(scratch / "la")}
            theirs = {name: _measure([la_python, "-m", "llm_analysis.analysis", *a], la_env, args.repeat)
                      for name, a in LLM_ANALYSIS.items()}  # fmt: skip
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    print(f"median of {args.repeat} runs each (fresh process; wall / CPU s; cold = first run, no bytecode or cache); "
          f"{os.cpu_count()} CPUs, load average {load_start:.1f} at the start, {os.getloadavg()[0]:.1f} at the end")
    if before:
        print(f"baseline {base}, interleaved with this tree's runs: this tree / baseline")
        print(f"{'command':<16} {'baseline wall':>13} {'cpu':>6} {'this wall':>10} {'cpu':>6} {'ratio wall':>11} "
              f"{'cpu':>6}")  # fmt: skip
        for name, b in before.items():
            r = ours[name]
            print(f"{name:<16} {b['wall']:>13.3f} {b['cpu']:>6.3f} {r['wall']:>10.3f} {r['cpu']:>6.3f} "
                  f"{r['wall'] / b['wall']:>11.2f} {r['cpu'] / b['cpu']:>6.2f}")  # fmt: skip
    if counts:
        print("instructions of one warm run (valgrind callgrind, 1e9)" + (": baseline, this tree, ratio" if before
                                                                          else ""))  # fmt: skip
        for name, c in counts.items():
            line = f"{name:<16} {c['ours'] / 1e9:>7.3f}"
            if "base" in c:
                line = f"{name:<16} {c['base'] / 1e9:>7.3f} {c['ours'] / 1e9:>7.3f} {c['ours'] / c['base']:>6.2f}"
            print(line)
    print(f"{'command':<16} {'scaleright wall':>15} {'cpu':>6} {'cold':>6}   {'llm-analysis wall':>17} {'cpu':>6} "
          f"{'cold':>6}")  # fmt: skip
    for name, r in ours.items():
        t = theirs.get(name)
        other = f"{t['wall']:>17.3f} {t['cpu']:>6.3f} {t['cold']:>6.3f}" if t else f"{'—':>17} {'':>6} {'':>6}"
        print(f"{name:<16} {r['wall']:>15.3f} {r['cpu']:>6.3f} {r['cold']:>6.3f}   {other}")
    print("floors, imports only (" + "; ".join(f"{name} {f['wall']:.3f} wall {f['cpu']:.3f} cpu"
                                               for name, f in floors.items()) + "): scaleright's own share is "
          f"{ours['estimate train']['wall'] - floors['estimate floor']['wall']:.3f} s of estimate train and "
          f"{ours['plan']['wall'] - floors['plan floor']['wall']:.3f} s of plan")  # fmt: skip
    est = statistics.median([ours["estimate train"]["wall"], ours["estimate infer"]["wall"]])
    la = (statistics.median([theirs["estimate train"]["wall"], theirs["estimate infer"]["wall"]])
          if theirs else float("nan"))  # fmt: skip
    print(f"help_s={ours['help']['wall']:.3f} estimate_s={est:.3f} plan_s={ours['plan']['wall']:.3f} "
          f"llm_analysis_s={la:.3f} floor_estimate_s={floors['estimate floor']['wall']:.3f} "
          f"floor_plan_s={floors['plan floor']['wall']:.3f}")


if __name__ == "__main__":
    main()
