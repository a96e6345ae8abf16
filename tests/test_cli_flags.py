"""The CLI's flag set is frozen: adding, removing or retyping a flag fails here until ``tests/cli_flags.json`` is
rewritten on purpose (``python -m tests.cli_flags``) and the change is reviewed with it. One vocabulary: a flag
name means the same kind of value wherever it appears."""

from __future__ import annotations

import json
from collections import defaultdict

from tests.cli_flags import SNAPSHOT, flag_set

# Same name, deliberately different values (each a decision, not an accident):
# --batch: a number of sequences in `estimate memory`; a number or "max" in `estimate infer`.
# --precision: the harness's torch dtype (fp32|bf16) in `bench train|infer`; a catalog precision elsewhere.
DIFFERENT_ON_PURPOSE = {"--batch", "--precision"}


def test_the_flag_set_is_the_reviewed_one():
    current, frozen = flag_set(), json.loads(SNAPSHOT.read_text())
    added = sorted(set(current) - set(frozen))
    removed = sorted(set(frozen) - set(current))
    changed = sorted(k for k in set(current) & set(frozen) if current[k] != frozen[k])
    assert not (added or removed or changed), (
        f"CLI flags changed (commands added {added}, removed {removed}, changed {changed}); if deliberate, run "
        "`python -m tests.cli_flags` and review the diff of tests/cli_flags.json")


def test_a_flag_name_takes_one_kind_of_value_everywhere():
    kinds: dict[str, set[str]] = defaultdict(set)
    for options in flag_set().values():
        for o in options:
            if o.startswith("--"):
                name, _, kind = o.partition(" ")
                kinds[name.split(" / ")[0]].add(kind if not kind.startswith("/") else "flag")
    mixed = {n: sorted(k) for n, k in kinds.items() if len(k) > 1 and n not in DIFFERENT_ON_PURPOSE}
    assert not mixed, mixed


def test_json_is_an_on_off_flag_on_every_command_that_has_it():
    for command, options in flag_set().items():
        json_opts = [o for o in options if o.split(" / ")[0].split(" ")[0] == "--json"]
        assert all(o == "--json" for o in json_opts), (command, json_opts)
