"""``serve capacity`` says what set its answer, and its JSON (and ``serve simulate --fleet``'s) is a typed result.

Scenarios: a TTFT limit of ten minutes cannot bind below the saturated rate, so throughput sets the capacity and a
looser limit would not raise it; a 60 ms TTFT limit on an 8B model whose queue waits tens of ms near saturation
binds well below it, and a looser TTFT limit raises the rate; a TPOT limit between the batch-1 decode step and the
full-batch one binds on TPOT. The saturated rate is checked against ``saturated_rate`` run on its own."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from scaleright.serve.simulate import build_model, find_capacity, saturated_rate

runner = CliRunner()
KW = dict(input_len=256, output_len=32, requests=150, rel_tol=0.05)


def _run(app, args):
    res = runner.invoke(app, args)
    assert res.exit_code == 0, f"{args}: {res.output}\n{res.exception!r}"
    return res.stdout


def test_a_loose_slo_is_throughput_bound_at_the_saturated_rate(llama_8b, h100):
    c = find_capacity(llama_8b, gpu=h100, slo_ttft_p99_ms=600_000, slo_tpot_p99_ms=1000, **KW)
    sat, _ = saturated_rate(llama_8b, model=build_model(llama_8b, gpu=h100), clients=256, gpu=h100, input_len=256,
                            output_len=32)  # fmt: skip
    assert c.binding == "throughput"
    assert c.saturated_rate_per_s == pytest.approx(sat, rel=1e-12)
    assert sat / (1 + KW["rel_tol"]) <= c.max_rate_per_s <= sat


def test_a_tight_ttft_slo_is_ttft_bound_and_loosening_it_raises_the_rate(llama_8b, h100):
    tight = find_capacity(llama_8b, gpu=h100, slo_ttft_p99_ms=60, slo_tpot_p99_ms=1000, **KW)
    assert tight.binding == "ttft_p99"
    assert tight.max_rate_per_s * (1 + KW["rel_tol"]) < tight.saturated_rate_per_s
    refused = min((t for t in tight.trials if not t.meets_slo and t.rate_per_s > tight.max_rate_per_s),
                  key=lambda t: t.rate_per_s)  # fmt: skip
    assert refused.ttft_p99_ms > 60 and refused.tpot_p99_ms <= 1000
    assert tight.result is not None and tight.result.ttft_ms["p99"] <= 60
    looser = find_capacity(llama_8b, gpu=h100, slo_ttft_p99_ms=240, slo_tpot_p99_ms=1000, **KW)
    assert looser.max_rate_per_s > tight.max_rate_per_s


def test_a_tpot_limit_between_batch_one_and_full_batch_decode_is_tpot_bound(llama_8b, h100):
    from scaleright.serve.simulate import simulate

    one = simulate(llama_8b, gpu=h100, input_len=256, output_len=32, concurrency=1, requests=5).tpot_ms["p99"]
    full = simulate(llama_8b, gpu=h100, input_len=256, output_len=32, concurrency=256, requests=512).tpot_ms["p50"]
    limit = (one + full) / 2
    assert one < limit < full
    c = find_capacity(llama_8b, gpu=h100, slo_ttft_p99_ms=600_000, slo_tpot_p99_ms=limit, **KW)
    assert c.binding == "tpot_p99" and c.max_rate_per_s * (1 + KW["rel_tol"]) < c.saturated_rate_per_s


def test_the_terminal_names_the_binding_limit_and_the_ceiling(app):
    out = _run(app, ["serve", "capacity", "--model", "llama-3.1-8b", "--gpu", "h100", "--input-len", "256",
                     "--output-len", "32", "--slo-ttft-p99-ms", "60", "--slo-tpot-p99-ms", "1000", "--requests",
                     "150"])  # fmt: skip
    assert "bound by the p99 TTFT limit" in out and "saturated rate" in out


CAP = ["serve", "capacity", "--model", "llama-3.1-8b", "--gpu", "h100", "--input-len", "256", "--output-len", "32",
       "--slo-ttft-p99-ms", "600000", "--slo-tpot-p99-ms", "1000", "--requests", "150", "--json"]


def test_capacity_json_validates_and_says_throughput(app):
    from scaleright.results.capacity import CapacityResult

    d = json.loads(_run(app, CAP))
    assert d["binding"] == "throughput" and d["saturated_rate_per_s"] >= d["max_rate_per_s"] > 0
    assert CapacityResult.from_dict(d).to_dict() == d
    with pytest.raises(ValidationError, match="extra"):
        CapacityResult.from_dict(d | {"bottleneck": "ttft"})
    with pytest.raises(ValidationError):
        CapacityResult.from_dict(d | {"binding": "memory"})
    with pytest.raises(ValidationError, match="extra"):
        CapacityResult.from_dict(d | {"trials": [d["trials"][0] | {"note": "x"}]})


def test_a_capacity_of_zero_validates_without_the_metrics(llama_8b, h100):
    from scaleright.results.capacity import CapacityResult

    c = find_capacity(llama_8b, gpu=h100, slo_ttft_p99_ms=1, slo_tpot_p99_ms=1000, **KW)  # below one prefill
    assert c.max_rate_per_s == 0 and c.result is None and c.binding == "ttft_p99"
    d = CapacityResult.of(c, model="m", gpu="g", price_usd_per_gpu_hour=None, price_source=None,
                          engine_status="fitted").to_dict()  # fmt: skip
    assert "ttft_ms" not in d and d["max_rate_per_s"] == 0


def test_the_capacity_metric_keys_are_simulates(llama_8b):
    """The metrics at the rate are ``serve simulate``'s keys, one for one (declared twice: a drift fails here)."""
    from scaleright.results.capacity import CapacityResult
    from scaleright.results.simulate import SimulateResult

    own = {"max_rate_per_s", "binding", "saturated_rate_per_s", "slo_ttft_p99_ms", "slo_tpot_p99_ms", "trials"}
    assert set(CapacityResult.model_fields) - own == set(SimulateResult.model_fields)


FLEET = """\
seed: 2
pools:
  - {name: pre, model: llama-3.1-8b, gpu: h100, replicas: 1, role: prefill, decode_pool: dec, kv_link: intra-node}
  - {name: dec, model: llama-3.1-8b, gpu: h100, replicas: 1, role: decode}
  - {name: big, model: llama-3.1-8b, gpu: h100, autoscale: {min_replicas: 0, max_replicas: 2, cold_start_s: 5}}
services:
  - {name: chat, pools: [pre, big], escalate: [0.25], rate: 4, requests: 40, input_len: 256, output_len: 32}
"""


def test_fleet_json_validates_and_an_undeclared_key_fails(app, tmp_path):
    from scaleright.results.fleet import FleetResult

    f = tmp_path / "fleet.yaml"
    f.write_text(FLEET)
    d = json.loads(_run(app, ["serve", "simulate", "--fleet", str(f), "--json"]))
    assert FleetResult.from_dict(d).to_dict() == d
    assert d["pools"]["pre"]["kv_link"] == "intra-node" and "kv_link" not in d["pools"]["dec"]
    with pytest.raises(ValidationError, match="extra"):
        FleetResult.from_dict(d | {"gpus": 3})
    bad = json.loads(json.dumps(d))
    bad["services"]["chat"]["p95_ms"] = 1.0
    with pytest.raises(ValidationError, match="extra"):
        FleetResult.from_dict(bad)


@pytest.mark.parametrize("name", ["capacity", "fleet"])
def test_schema_prints_capacity_and_fleet(app, name):
    schema = json.loads(_run(app, ["schema", name]))
    assert schema["additionalProperties"] is False
    key = {"capacity": "binding", "fleet": "pools"}[name]
    assert key in schema["properties"] and key in schema["required"]


def test_the_outputs_validate_against_the_published_schemas_independently(app, tmp_path):
    """jsonschema (not pydantic) checks each command's JSON against what ``scaleright schema NAME`` prints."""
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema validates the published schemas independently")
    f = tmp_path / "fleet.yaml"
    f.write_text(FLEET)
    for name, args in (("capacity", CAP), ("fleet", ["serve", "simulate", "--fleet", str(f), "--json"])):
        schema = json.loads(_run(app, ["schema", name]))
        doc = json.loads(_run(app, args))
        validator = jsonschema.Draft202012Validator(schema)
        assert [e.message for e in validator.iter_errors(doc)] == [], name
        assert list(validator.iter_errors(doc | {"undeclared_key": 1})), name

