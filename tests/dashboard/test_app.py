"""The dashboard's HTTP contract and its safety rules, through FastAPI's in-process client.

Contracts (issue 12): ``GET /healthz`` 200; ``POST /api/plan`` with a scenario as YAML or JSON returns exactly what
``scaleright plan --json`` prints for that scenario; a bad scenario is 422 with the CLI's one-line message.
Safety: loopback Host only, bounded bodies, escaped user strings, no path traversal, CSRF-protected forms, no files
read on a request's behalf.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="the dashboard extra is not installed (pip install '.[dashboard]')")
from fastapi.testclient import TestClient

from scaleright.dashboard.app import MAX_BODY_BYTES, create_app
from tests.cli_helpers import CLI_ONLY, fresh_modules, run_main

ROOT = Path(__file__).resolve().parents[2]
BASE = "http://127.0.0.1:8765"
LORA = ("name: tiny LoRA\nmodel: llama-3.2-1b\ntask: lora\ntraining: {tokens: 1.0e+8}\n"
        "constraints: {gpu_types: [h100-sxm, l40s], max_gpus: 8}\n")  # fmt: skip


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(), base_url=BASE)


def _token(client: TestClient, path: str = "/") -> str:
    return re.search(r'name="csrf" value="([0-9a-f]+)"', client.get(path).text).group(1)


def test_healthz(client):
    r = client.get("/healthz")
    assert r.status_code == 200 and r.json()["status"] == "ok"


@pytest.mark.parametrize("example", [None, "lora-7b-one-gpu", "llama70b-full-finetune", "chat-service-8b"])
def test_api_plan_is_what_plan_json_prints(example, client, tmp_path, monkeypatch, capsys):
    """The same JSON from both (one home: ``results.plan.PlanResult``), for a small LoRA scenario and the dashboard's
    examples (the repository's examples/: training, and serving sized by simulation)."""
    text = LORA if example is None else (ROOT / "examples" / f"{example}.yaml").read_text()
    scenario = tmp_path / "s.yaml"
    scenario.write_text(text)
    code, out, err = run_main(["plan", str(scenario), "--json"], monkeypatch, capsys)
    assert code == 0, err
    cli = json.loads(out)
    api = client.post("/api/plan", content=text, headers={"content-type": "application/yaml"})
    assert api.status_code == 200
    got = api.json()
    for d in (cli, got):  # the search's timings differ run to run
        for timing in ("wall_s", "cpu_s", "layouts_per_s"):
            d["search"].pop(timing, None)
    assert got == cli


def test_api_plan_takes_json_too(client):
    body = {"name": "j", "model": "llama-3.2-1b", "task": "lora", "training": {"tokens": 1e8},
            "constraints": {"gpu_types": ["h100-sxm"], "max_gpus": 8}}  # fmt: skip
    r = client.post("/api/plan", content=json.dumps(body), headers={"content-type": "application/json"})
    assert r.status_code == 200 and r.json()["recommendation"]["gpu"] == "h100-sxm"


def test_a_bad_scenario_is_422_with_the_cli_message(client, tmp_path, monkeypatch, capsys):
    bad = LORA.replace("task: lora", "task: lora\ncolour: blue")
    scenario = tmp_path / "s.yaml"
    scenario.write_text(bad)
    code, _, err = run_main(["plan", str(scenario)], monkeypatch, capsys)
    assert code == 2
    cli_message = err.strip().removeprefix("error: ").replace(str(scenario), "scenario")
    r = client.post("/api/plan", content=bad, headers={"content-type": "application/yaml"})
    assert r.status_code == 422 and r.json() == {"error": cli_message}
    assert "colour" in cli_message
    v = client.post("/api/validate", content=bad, headers={"content-type": "application/yaml"})
    assert v.status_code == 422 and v.json() == {"error": cli_message}


def test_a_model_path_is_refused_and_never_read(client):
    s = ("name: x\nmodel: /etc/passwd\ntask: inference\n"
         "inference: {requests_per_s: 1, input_len: 10, output_len: 10}\n")  # fmt: skip
    r = client.post("/api/plan", content=s, headers={"content-type": "application/yaml"})
    assert r.status_code == 422 and "not a catalog model; the dashboard reads no files" in r.json()["error"]


@pytest.mark.parametrize("ctype", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data", ""])
def test_api_refuses_what_a_cross_site_form_can_send(client, ctype):
    r = client.post("/api/plan", content=LORA, headers={"content-type": ctype} if ctype else {})
    assert r.status_code == 415


def test_api_refuses_a_foreign_origin(client):
    r = client.post("/api/plan", content=LORA, headers={"content-type": "application/yaml",
                                                          "origin": "http://evil.example"})  # fmt: skip
    assert r.status_code == 403


def test_bodies_are_bounded(client):
    r = client.post("/api/plan", content="#" * (MAX_BODY_BYTES + 1), headers={"content-type": "application/yaml"})
    assert r.status_code == 413
    r = client.get("/catalog", params={"q": "x" * 101})
    assert r.status_code == 413


def test_a_foreign_host_header_is_refused_on_loopback(client):
    assert TestClient(create_app(), base_url="http://attacker.example:8765").get("/").status_code == 421
    assert TestClient(create_app(), base_url="http://localhost:8765").get("/").status_code == 200


def test_form_needs_the_csrf_token_cookie_and_origin(client):
    token = _token(client)
    assert client.post("/plan", data={"scenario": LORA, "csrf": "0" * 64}).status_code == 403
    assert client.post("/plan", data={"scenario": LORA, "csrf": token},
                       headers={"origin": "http://evil.example"}).status_code == 403  # fmt: skip
    fresh = TestClient(create_app(), base_url=BASE)  # no cookie from a page of this dashboard
    assert fresh.post("/plan", data={"scenario": LORA, "csrf": token}).status_code == 403
    ok = client.post("/plan", data={"scenario": LORA, "csrf": token}, headers={"origin": BASE})
    assert ok.status_code == 200 and "Best option per GPU type" in ok.text


def test_user_strings_are_escaped(client):
    evil = LORA.replace("name: tiny LoRA", 'name: "<script>alert(1)</script>"')
    page = client.post("/plan", data={"scenario": evil, "csrf": _token(client)})
    assert page.status_code == 200
    assert "<script>alert(1)</script>" not in page.text and "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text
    bad = client.post("/plan", data={"scenario": evil + "\n<img src=x onerror=alert(1)>: 1\n", "csrf": _token(client)})
    assert bad.status_code == 422 and "<img src=x" not in bad.text


@pytest.mark.parametrize("path", ["/static/../app.py", "/static/%2e%2e%2fapp.py", "/static/app.py",
                                  "/static/..%2F..%2Fetc%2Fpasswd", "/?example=../../etc/passwd"])
def test_no_path_traversal(client, path):
    r = client.get(path)
    assert r.status_code == 404 and "import" not in r.text and "root:" not in r.text


def test_plan_page_carries_the_charts_data_from_the_plan(client):
    page = client.post("/plan", data={"scenario": LORA, "csrf": _token(client)})
    figs = json.loads(re.search(r'<script type="application/json" id="figures">(.*?)</script>', page.text,
                                re.S).group(1))  # fmt: skip
    assert {f["id"] for f in figs} >= {"pareto", "curve", "memory"}
    res = client.post("/api/plan", content=LORA, headers={"content-type": "application/yaml"}).json()
    pareto = next(f for f in figs if f["id"] == "pareto")
    xs = sorted(x for t in pareto["data"] if t.get("mode") == "markers" and t["name"] != "recommended" for x in t["x"])
    assert xs == sorted(o["time_h"] for o in res["all_options"] if o.get("time_h") and o.get("cost_usd"))


def test_catalog_search_and_sources(client):
    r = client.get("/catalog", params={"q": "h100-sxm", "kind": "prices"})
    assert r.status_code == 200 and "h100-sxm" in r.text and "source" in r.text
    assert client.get("/catalog", params={"kind": "../etc"}).status_code == 404


def test_runs_page_reads_the_store_without_changing_it(tmp_path):
    from scaleright.bench.db import RunStore
    from tests.bench.conftest import sample_run

    db = tmp_path / "runs.sqlite"
    RunStore(db).add(**sample_run())
    before = db.read_bytes()
    page = TestClient(create_app(db=db), base_url=BASE).get("/runs")
    assert page.status_code == 200 and "<td>1</td>" in page.text
    assert db.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["runs.sqlite"]


def test_the_dashboard_imports_no_cli_library(tmp_path):
    """The dashboard sits on the typed API, not on the CLI: in a fresh interpreter, the app serving a plan (JSON API),
    the editor, the catalog and the run store holds none of the CLI's modules (typer, its click, rich,
    scaleright.cli) — its text and JSON helpers are the API's (``visible``, ``json_safe``)."""
    code = ("from fastapi.testclient import TestClient\n"
            "from scaleright.dashboard.app import create_app\n"
            f"c = TestClient(create_app(db={str(tmp_path / 'runs.sqlite')!r}), base_url={BASE!r})\n"
            f"text = open({str(ROOT / 'examples' / 'lora-7b-one-gpu.yaml')!r}).read()\n"
            "print(c.post('/api/plan', content=text, headers={'content-type': 'application/yaml'}).status_code,\n"
            "      *(c.get(p).status_code for p in ('/', '/catalog', '/runs')))")  # fmt: skip
    lines, held = fresh_modules(code, CLI_ONLY)
    assert lines[0] == "200 200 200 200", lines[0]
    assert held == [], held


def test_the_bundled_examples_are_the_repository_examples():
    for f in (ROOT / "src/scaleright/dashboard/examples").glob("*.yaml"):
        assert f.read_text() == (ROOT / "examples" / f.name).read_text(), f.name


@pytest.mark.parametrize(("args", "message"), [
    (["--port", "0"], "--port=0 must be between 1 and 65535"),
    (["--port", "70000"], "--port=70000 must be between 1 and 65535"),
    (["--host", "a b"], "--host='a b' must be an address or host name"),
])  # fmt: skip
def test_dashboard_command_refuses_bad_flags_in_one_line(args, message, monkeypatch, capsys):
    from tests.cli_helpers import assert_one_line

    code, out, err = run_main(["dashboard", *args], monkeypatch, capsys)
    assert_one_line(code, out, err, re.escape(message))


@pytest.mark.parametrize(("extra", "field"), [
    ("  tiers: [{model: /etc/hostname, escalate: 0.5}]\n", "inference.tiers[0].model"),
    ("  arrival: trace\n  trace: /etc/hostname\n", "inference.trace"),
])  # fmt: skip
def test_no_scenario_field_makes_the_server_read_a_file(client, extra, field):
    rate = "" if "trace" in extra else "  requests_per_s: 1\n"  # a trace brings its own rate
    s = "name: x\nmodel: llama-3.2-1b\ntask: inference\ninference:\n" + rate + "  input_len: 10\n"
    s += "  output_len: 10\n" + extra
    r = client.post("/api/plan", content=s, headers={"content-type": "application/yaml"})
    assert r.status_code == 422, r.text
    assert r.json()["error"].startswith(f"scenario: {field}") and "the dashboard reads no files" in r.json()["error"]
