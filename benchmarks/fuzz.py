"""The long fuzz run: N generated inputs through the CLI, each held to the promise (exit 0 with finite numbers, or
exit 2 with one line; no input file changed; no known-invalid input accepted).

    python benchmarks/fuzz.py                      # 10,000 inputs, seed 0
    python benchmarks/fuzz.py --inputs 2000 --seed 7 --families scenario,cli

Inputs come from the same generators and mutation tables as ``tests/test_fuzz.py`` (``tests/fuzz/strategies.py``),
drawn here from a seeded ``random.Random`` per input, so input ``i`` of a seed is the same on every machine
(``--only I`` reruns one). Families take turns. Prints the outcome counts per family, every failure class with its
first reproducer (a shell snippet), and as its LAST line, machine-readable:

    inputs=N ok=N rejected=N tracebacks=N silently_accepted=N files_changed=N other=N

(``other``: timeouts, wrong exit codes or multi-line errors, and exit 0 with unusable JSON).
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # before benchmarks/ (this file is also called fuzz)
if str(ROOT / "src") not in sys.path:
    sys.path.insert(1, str(ROOT / "src"))
sys.modules.pop("fuzz", None)

from fuzz.harness import OUTCOMES, TIME_LIMIT_S, run_case  # noqa: E402
from fuzz.strategies import FAMILIES, generate  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--inputs", type=int, default=10_000, help="how many inputs to try (default 10000)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the generators (default 0)")
    ap.add_argument("--families", default=",".join(FAMILIES), help=f"comma-separated subset of {', '.join(FAMILIES)}")
    ap.add_argument("--time-limit", type=float, default=TIME_LIMIT_S, help="seconds per input before a timeout")
    ap.add_argument("--only", type=int, default=None, help="run only input number ONLY (to reproduce it)")
    ap.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    args = ap.parse_args(argv)
    families = [f for f in args.families.split(",") if f]
    bad = [f for f in families if f not in FAMILIES]
    if bad or not families or args.inputs < 1:
        ap.error(f"--families must name some of {', '.join(FAMILIES)}; --inputs must be >= 1")

    counts: dict[str, collections.Counter[str]] = {f: collections.Counter() for f in families}
    classes: dict[tuple[str, str], list] = {}  # (family, signature) -> [count, first index, case, outcome]
    work = Path(tempfile.mkdtemp(prefix="scaleright-fuzz-"))
    t0 = time.perf_counter()
    indices = [args.only] if args.only is not None else range(args.inputs)
    slowest = (0.0, -1)
    try:
        for i in indices:
            family = families[i % len(families)]
            case = generate(family, f"{args.seed}:{i}")
            out = run_case(case, time_limit_s=args.time_limit, workdir=work)
            counts[family][out.kind] += 1
            slowest = max(slowest, (out.seconds, i))
            if out.kind not in ("ok", "rejected"):
                key = (family, out.signature(case.why))
                entry = classes.setdefault(key, [0, i, case, out])
                entry[0] += 1
            if not args.quiet and (i + 1) % 500 == 0:
                done = sum(sum(c.values()) for c in counts.values())
                print(f"... {done} inputs, {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    wall = time.perf_counter() - t0

    total: collections.Counter[str] = collections.Counter()
    for c in counts.values():
        total.update(c)
    n = sum(total.values())
    print(
        f"scaleright fuzz: {n} inputs, seed {args.seed}, {wall:.0f} s ({1e3 * wall / max(n, 1):.0f} ms/input; "
        f"slowest input {slowest[1]}: {slowest[0]:.1f} s), python {sys.version.split()[0]}, {os.cpu_count()} CPUs"
    )
    width = max(len(k) for k in OUTCOMES)
    print("\n" + "family".ljust(10) + "".join(k.rjust(width + 1) for k in OUTCOMES) + "total".rjust(7))
    for f in families:
        print(
            f.ljust(10)
            + "".join(str(counts[f][k]).rjust(width + 1) for k in OUTCOMES)
            + str(sum(counts[f].values())).rjust(7)
        )
    print("all".ljust(10) + "".join(str(total[k]).rjust(width + 1) for k in OUTCOMES) + str(n).rjust(7))

    if classes:
        print(f"\n{len(classes)} failure classes (family, outcome and where; count; first input and its reproducer):")
        for (family, sig), (count, first, case, out) in sorted(classes.items(), key=lambda kv: -kv[1][0]):
            print(f"\n### [{family}] {sig}  x{count}  (first: input {first}, --seed {args.seed} --only {first})")
            print(f"mutation: {case.why}; known invalid: {case.known_invalid}")
            if out.detail:
                print(f"detail: {out.detail}")
            err = out.stderr.strip().splitlines()
            if err and out.kind != "traceback":
                print("stderr: " + " | ".join(err[:3])[:300])
            print(case.reproducer(limit=1500))
    other = n - sum(total[k] for k in ("ok", "rejected", "traceback", "silently_accepted", "file_changed"))
    print(
        f"inputs={n} ok={total['ok']} rejected={total['rejected']} tracebacks={total['traceback']} "
        f"silently_accepted={total['silently_accepted']} files_changed={total['file_changed']} other={other}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
