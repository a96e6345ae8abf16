"""Runs Vidur (microsoft/vidur 0.0.26) offline on local profiling data sets; used by ``serve_speed.py``.

Runs only inside a virtual environment with vidur installed and imports nothing from scaleright:

    VENV/bin/python vidur_runner.py --dataset REPO_ID=DIR [--dataset ...] -- <python -m vidur.main arguments>

Vidur's ``SklearnExecutionTimePredictor`` calls ``huggingface_hub.snapshot_download`` for its profiling data sets
and for cached predictions. Here that name in Vidur's module returns ``DIR`` for each ``REPO_ID`` given and raises
``OSError`` for any other repo (Vidur catches the failed predictions download and trains its regressors from the
profiling tables, as on a first run); ``HF_HUB_OFFLINE=1`` is set as well, so nothing reaches the network.
Otherwise the run is ``vidur.main.main``: config from the arguments, seeds, ``Simulator(config)``, ``run()``.

Prints, as its last stdout line, one JSON object: ``import_s`` (importing vidur), ``predictor_s`` (constructing the
execution-time predictor: reading the tables, fitting and predicting every operation's grid), ``setup_s`` (the
rest of ``Simulator.__init__``: cluster, request generation, event queue), ``simulate_s`` (``Simulator.run``),
``simulation_cpu_s`` (CPU seconds of set-up and run, without the predictor), ``simulated_s`` (the simulated clock
at the end) and ``vidur_version``.
"""

from __future__ import annotations

import json
import os
import sys
import time


def main(argv: list[str]) -> None:
    if "--" not in argv:
        sys.exit("usage: vidur_runner.py --dataset REPO_ID=DIR [...] -- <vidur.main arguments>")
    cut = argv.index("--")
    ours, vidur_args = argv[:cut], argv[cut + 1 :]
    local: dict[str, str] = {}
    for i, a in enumerate(ours):
        if a == "--dataset":
            repo, _, path = ours[i + 1].partition("=")
            local[repo] = path
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.setdefault("WANDB_MODE", "disabled")

    t0 = time.perf_counter()
    import vidur
    from vidur.config import SimulationConfig
    from vidur.execution_time_predictor import sklearn_execution_time_predictor as skl
    from vidur.execution_time_predictor.execution_time_predictor_registry import ExecutionTimePredictorRegistry
    from vidur.simulator import Simulator
    from vidur.utils.random import set_seeds

    import_s = time.perf_counter() - t0

    def snapshot_download(repo_id: str, **_: object) -> str:
        if repo_id in local:
            return local[repo_id]
        raise OSError(f"offline: no local copy of {repo_id}")

    skl.snapshot_download = snapshot_download  # the name Vidur's predictor module calls

    predictor_s = [0.0, 0.0]  # wall, CPU
    get = ExecutionTimePredictorRegistry.get

    def timed_get(key, *args, **kwargs):  # type: ignore[no-untyped-def]
        t, c = time.perf_counter(), time.process_time()
        out = get(key, *args, **kwargs)
        predictor_s[0] += time.perf_counter() - t
        predictor_s[1] += time.process_time() - c
        return out

    ExecutionTimePredictorRegistry.get = timed_get  # type: ignore[method-assign]

    sys.argv = ["vidur.main", *vidur_args]
    config = SimulationConfig.create_from_cli_args()
    set_seeds(config.seed)
    t1, c1 = time.perf_counter(), time.process_time()
    sim = Simulator(config)
    t2 = time.perf_counter()
    sim.run()
    t3, c3 = time.perf_counter(), time.process_time()
    print(json.dumps({"import_s": import_s, "predictor_s": predictor_s[0], "setup_s": t2 - t1 - predictor_s[0],
                      "simulate_s": t3 - t2, "simulation_cpu_s": c3 - c1 - predictor_s[1],
                      "simulated_s": float(sim._time),
                      "vidur_version": getattr(vidur, "__version__", "?")}))  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])
