"""How fast the planner searches: Llama 3.1 70B full fine-tune over the whole GPU catalog.

Prints layouts fully evaluated per second by the vectorised search — counting only layouts that received the
performance model (those that fit in memory, with optimizer and/or activation offload where a layout fits only
with it), over the search's wall time (enumeration, memory of every valid layout and of the offload variants of
those that do not fit, performance model, per-count winners) — as the median of ``--repeat`` runs of ``plan()``,
and the same per CPU-second of the process (what other load on a shared machine does not inflate); the end-to-end
wall time of ``plan()`` (search and explanations); and the same layouts evaluated one at a time by a plain Python
loop over ``estimate.memory.training_memory`` + ``estimate.train.train_step_arrays`` (timed on a random sample and
reported per layout), as a ratio measured in this run. Last line: ``layouts_per_s=<n> wall_s=<s> loop_ratio=<r>``
(``wall_s``: a fresh CLI process, YAML in, JSON out).
Target (issue #9): >= 1,000,000 fully evaluated layouts/s on a 2-core machine.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from scaleright.catalog import Catalog
from scaleright.estimate.comm import system_of
from scaleright.estimate.layout import Layout
from scaleright.estimate.memory import training_memory
from scaleright.estimate.train import train_step_arrays
from scaleright.plan.planner import plan
from scaleright.plan.scenario import parse_scenario
from scaleright.plan.search import gpu_counts, train_layout_grid
from scaleright.workload import load_model

SCENARIO = {
    "name": "plan speed: 70B full fine-tune, whole catalog",
    "model": "llama-3.1-70b",
    "task": "full-finetune",
    "training": {"tokens": 2e9, "seq_len": 4096, "global_batch": 512},
    "constraints": {"max_gpus": 512},
    # every GPU gets a price so none is skipped before the search
    "pricing": {"mode": "on-demand", "price_usd_per_gpu_hour": {}},
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sample", type=int, default=300, help="layouts timed in the per-layout Python loop")
    ap.add_argument("--repeat", type=int, default=5, help="runs of plan(); the median is reported")
    args = ap.parse_args()

    cat = Catalog.load()
    scn = parse_scenario(SCENARIO | {"pricing": {"mode": "on-demand",
                                                 "price_usd_per_gpu_hour": {g: 1.0 for g in cat.gpus}}})
    walls, rates, cpu_rates, n_fit = [], [], [], 0
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        res = plan(scn, catalog=cat)
        walls.append(time.perf_counter() - t0)
        s = res.search
        n_fit = s["layouts_fit"]  # each received the performance model
        rates.append(n_fit / s["wall_s"])
        cpu_rates.append(n_fit / s["cpu_s"])  # the process's CPU time: what a shared machine's load does not inflate
    wall = float(np.median(walls))
    vec_rate = float(np.median(rates))
    cpu_rate = float(np.median(cpu_rates))
    print(f"gpu types: {res.search['gpu_types']}  valid layouts (memory evaluated): "
          f"{res.search['layouts_evaluated']:,}  fit in memory and fully evaluated: {n_fit:,} (of which "
          f"{res.search['layouts_fit_offload']:,} fit only with optimizer and/or activation offload)")
    print(f"vectorised search: {vec_rate:,.0f} fully evaluated layouts/s (median of {args.repeat}: "
          f"{', '.join(f'{r:,.0f}' for r in rates)}); per CPU-second of this process: {cpu_rate:,.0f}; plan() "
          f"end to end: {wall:.3f} s")

    # The same kind of layouts through a plain per-layout loop (memory, then the performance model).
    spec = load_model("llama-3.1-70b", catalog=cat)
    g = cat.gpu("h100-sxm")
    system = system_of(g)
    grid = train_layout_grid(spec, counts=gpu_counts(system.gpus_per_node, 512), gpus_per_node=8, seq_len=4096,
                             global_batch=512, task="full-finetune")
    rng = np.random.default_rng(0)
    idx = rng.choice(len(grid), size=min(args.sample, len(grid)), replace=False)
    t0 = time.perf_counter()
    for i in idx:
        lay: Layout = grid.layout(int(i), global_batch=512)
        training_memory(spec, layout=lay, seq_len=4096, task="full-finetune")
        train_step_arrays(spec, gpu=g, system=system, seq_len=4096, global_batch=512, task="full-finetune",
                          **lay.kwargs())
    loop_rate = len(idx) / (time.perf_counter() - t0)
    print(f"per-layout Python loop: {loop_rate:,.0f} layouts/s on a sample of {len(idx)}")
    # End to end as a user runs it: a fresh process, YAML in, JSON out.
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    import yaml

    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "scenario.yaml"
        f.write_text(yaml.safe_dump(scn.model_dump(exclude_none=True)))
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "scaleright", "plan", str(f), "--json"], check=True,
                       stdout=subprocess.DEVNULL)
        cli_wall = time.perf_counter() - t0
    print(f"CLI end to end (new process, YAML in, JSON out): {cli_wall:.3f} s")
    print(f"layouts_per_s={vec_rate:.0f} wall_s={cli_wall:.3f} loop_ratio={vec_rate / loop_rate:.0f} "
          f"cpu_layouts_per_s={cpu_rate:.0f}")


if __name__ == "__main__":
    main()
