"""``scaleright prices import``: SkyPilot catalog CSVs and gpuhunt offers → a ``prices.csv`` that ``--catalog DIR``
reads. Fixtures in tests/fixtures/prices_import (see its README); never the network. Expected prices are the
fixture's instance prices divided by their GPU counts by hand (Lambda gpu_8x_h100_sxm5 $23.92/h / 8 = $2.99)."""

from __future__ import annotations

import csv
import dataclasses
import datetime
import json
import shutil
import sys
import types
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scaleright.catalog import prices_import as pi
from scaleright.catalog.prices import PRICE_COLUMNS, find_price, provider_key
from scaleright.catalog.store import Catalog
from tests.cli_helpers import assert_one_line, run_main

FIX = Path(__file__).parent / "fixtures" / "prices_import"
ROOT = FIX / "catalogs" / "v8"


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _import(tmp_path, monkeypatch, capsys, *args: str) -> tuple[int, str, str]:
    return run_main(["prices", "import", *args], monkeypatch, capsys)


@pytest.fixture
def imported(tmp_path, monkeypatch, capsys) -> tuple[Path, str]:
    out = tmp_path / "cat"
    code, stdout, err = _import(tmp_path, monkeypatch, capsys, "--from", "skypilot-catalog", str(ROOT),
                                "--out", str(out), "--date", "2026-11-30")  # fmt: skip
    assert code == 0, err
    return out, stdout


def _find(rows, gpu, kind, provider_word):
    return [r for r in rows if r["gpu_id"] == gpu and r["kind"] == kind and r["provider"].startswith(provider_word)]


def test_skypilot_prices_per_gpu_hour(imported) -> None:
    out, _ = imported
    rows = _rows(out / "prices.csv")
    assert list(rows[0]) == list(PRICE_COLUMNS)
    # 8-GPU instances divided by 8; the 1-GPU SXM5 at $3.29 is dearer than 23.92 / 8, so the 8x is kept
    lam = _find(rows, "h100-sxm", "on-demand", "Lambda")
    assert {r["provider"] for r in lam} == {"Lambda us-east-1 (via SkyPilot catalog)",
                                           "Lambda us-west-1 (via SkyPilot catalog)"}  # fmt: skip
    assert all(float(r["usd"]) == pytest.approx(23.92 / 8) for r in lam)
    assert "derived: /8" in lam[0]["notes"]
    [aws] = _find(rows, "h100-sxm", "on-demand", "AWS")
    assert float(aws["usd"]) == pytest.approx(55.04 / 8)  # two zones of one region: one row
    [p4d] = _find(rows, "a100-40gb", "on-demand", "AWS")
    assert float(p4d["usd"]) == pytest.approx(21.957642 / 8, abs=1e-6)
    [p4de] = _find(rows, "a100-80gb", "on-demand", "AWS")  # AcceleratorName A100-80GB, GpuInfo 81920 MiB
    assert float(p4de["usd"]) == pytest.approx(27.44705 / 8, abs=1e-6)
    # RunPod's spot column; the 2x L40 at $1.38/h is the same $0.69 per GPU as the 1x
    [spot] = _find(rows, "l40", "spot", "RunPod")
    assert float(spot["usd"]) == pytest.approx(0.69)
    assert all(r["date"] == "2026-11-30" and "SkyPilot catalog" in r["source"] and "sha256" in r["source"]
               for r in rows)  # fmt: skip
    assert all(r["unit"] == "usd_per_gpu_hour" for r in rows)


def test_form_factor_from_the_instance_type(imported) -> None:
    """An 'H100' is SXM or PCIe by its instance: Lambda's gpu_1x_h100_pcie and RunPod's 1x_H100 (SkyPilot's
    fetch_runpod.py files RunPod's H100-PCIe as 'H100') are PCIe; RunPod's A100-80GB is the PCIe card."""
    rows = _rows(imported[0] / "prices.csv")
    by_sku = {(r["provider"].split()[0], r["sku"].split(" (")[0]): r["gpu_id"] for r in rows}
    assert by_sku[("Lambda", "gpu_1x_h100_pcie")] == "h100-pcie"
    assert by_sku[("RunPod", "1x_H100_SECURE")] == "h100-pcie"
    assert by_sku[("RunPod", "1x_H100-SXM_SECURE")] == "h100-sxm"
    assert by_sku[("RunPod", "1x_A100-80GB_SECURE")] == "a100-80gb-pcie"
    assert by_sku[("RunPod", "1x_A100-80GB-SXM_SECURE")] == "a100-80gb"
    assert by_sku[("Lambda", "gpu_1x_gh200")] == "gh200"


def test_unmapped_offers_are_reported_not_guessed(imported) -> None:
    out, stdout = imported
    rows = _rows(out / "prices.csv")
    skus = {r["sku"].split(" (")[0] for r in rows}
    # Lambda's gpu_8x_a100 (40 GB: SXM4 or PCIe, the name does not say), the 16 GB V100 (not in the catalog),
    # RunPod's A40 (not in the catalog), AWS's 1/8 L4 share: none written, each named in the report
    assert not skus & {"gpu_8x_a100", "gpu_8x_v100", "1x_A40_SECURE", "g6f.large", "m6i.large"}
    flat = " ".join(stdout.split())
    assert "A100 40 GiB: ambiguous" in flat
    assert "V100 16 GiB: memory" in flat
    assert "A40 48 GiB: unknown" in flat
    assert "L4: fractional GPU (0.125 per instance)" in flat


def test_gcp_gpu_priced_with_its_host_vm(imported) -> None:
    """GCP's catalog prices a GPU alone; the instance is the GPU plus its A2 / A3 host VM in the same zone. The
    fixture's host prices are the differences to GCP's instance prices in the built-in rows (a2-highgpu-1g
    $3.673385/h on-demand, read off GCP's page on 2026-09-09; a3-highgpu-1g spot $6.571/h = GPU $5.8632 + host), so
    the sums must come back as those instance prices, not the GPU-only $2.933908 and $5.8632."""
    out, stdout = imported
    rows = _rows(out / "prices.csv")
    [a100] = _find(rows, "a100-40gb", "on-demand", "GCP")
    assert float(a100["usd"]) == pytest.approx(3.673385) and a100["sku"] == "a2-highgpu-1g"
    assert "host VM a2-highgpu-1g $0.739477/h in us-central1-a" in a100["notes"]
    [h100] = _find(rows, "h100-sxm", "spot", "GCP")
    assert float(h100["usd"]) == pytest.approx(6.571)
    flat = " ".join(stdout.split())
    assert "A100: GPU-only price and no on-demand a2-highgpu-1g host VM priced in us-central1-f" in flat
    assert "T4: no instance type (a GPU-only price; its host VM, billed on top, is the user's choice)" in flat


def test_catalog_dir_reads_the_import(imported, monkeypatch, capsys) -> None:
    """The contract: ``--catalog DIR`` reads DIR/prices.csv. Its rows override the built-in rows of the same GPU,
    kind, provider and region (a built-in row that names no region stands for any), and the other providers'
    built-in rows stay: importing Lambda, RunPod, AWS and GCP keeps Hyperstack's built-in H100 SXM $2.50
    (DS436/sanskrit-token, 2026-09-09), cheaper than the import's Lambda 8x at $2.99, so it is still the offer."""
    out, _ = imported
    cat, builtin = Catalog.load(out), Catalog.load()
    mine = {provider_key(r["provider"]) for r in _rows(out / "prices.csv")
            if r["gpu_id"] == "h100-sxm" and r["kind"] == "on-demand"}  # fmt: skip
    assert mine == {"aws", "lambda", "runpod"}  # each in named regions; the built-in rows of these three name
    # us-east-1 (AWS) or no region, so the import overrides every one of them

    def h100_od(c: Catalog) -> list:
        return [r for r in c.prices if r.gpu_id == "h100-sxm" and r.kind == "on-demand"]

    others = [r for r in h100_od(builtin) if provider_key(r.provider) not in mine]
    assert any(r.provider == "GCP us-central1" for r in others)  # the import has GCP spot rows only
    assert others and all(r in h100_od(cat) for r in others)  # the other providers' rows stay
    for r in h100_od(cat):
        assert provider_key(r.provider) not in mine or r.date == "2026-11-30", r  # the import's, dated by it
    today = datetime.date(2026, 12, 1)
    pick = find_price("h100-sxm", "on-demand", catalog=cat, today=today)
    assert (pick.usd, pick.provider, pick.date) == (2.5, "Hyperstack", "2026-09-09")
    code, stdout, err = run_main(["catalog", "prices", "--gpu", "l40", "--kind", "spot", "--catalog", str(out),
                                  "--json"], monkeypatch, capsys)  # fmt: skip
    assert code == 0, err
    assert [r["usd"] for r in json.loads(stdout)] == [pytest.approx(0.69)]  # the import's RunPod row replaced
    # the built-in (undated) RunPod one; no other provider has an L40 spot row


def test_catalog_yaml_prices_only_keeps_the_import_alone(imported) -> None:
    """``prices: only`` in DIR/catalog.yaml: the import is every price, so the H100 SXM offer is the import's
    cheapest, Lambda's gpu_8x_h100_sxm5 at $23.92/h / 8 = $2.99, and no built-in row is left."""
    out, _ = imported
    (out / "catalog.yaml").write_text("prices: only\n")
    cat = Catalog.load(out)
    assert len(cat.prices) == len(_rows(out / "prices.csv"))
    pick = find_price("h100-sxm", "on-demand", catalog=cat, today=datetime.date(2026, 12, 1))
    assert pick.usd == pytest.approx(2.99)
    assert pick.provider.startswith("Lambda") and pick.region in ("us-east-1", "us-west-1")
    assert pick.date == "2026-11-30"


def test_date_defaults_to_the_file_day(tmp_path, monkeypatch, capsys) -> None:
    src = tmp_path / "aws"
    src.mkdir()
    shutil.copy(ROOT / "aws" / "vms.csv", src / "vms.csv")
    import os

    os.utime(src / "vms.csv", (1_780_000_000, 1_780_000_000))  # 2026-05-28 UTC
    code, _, err = _import(tmp_path, monkeypatch, capsys, "--from", "skypilot-catalog", str(src / "vms.csv"),
                           "--out", str(tmp_path / "o"))  # fmt: skip
    assert code == 0, err
    rows = _rows(tmp_path / "o" / "prices.csv")
    assert {r["date"] for r in rows} == {"2026-05-28"}
    assert all("modification day" in r["notes"] for r in rows)


def test_file_dated_in_the_future_needs_date(tmp_path, monkeypatch, capsys) -> None:
    src = tmp_path / "aws"
    src.mkdir()
    shutil.copy(ROOT / "aws" / "vms.csv", src / "vms.csv")
    import os

    os.utime(src / "vms.csv", (4_102_444_800, 4_102_444_800))  # 2100-01-01
    code, out, err = _import(tmp_path, monkeypatch, capsys, "--from", "skypilot-catalog", str(src), "--out",
                             str(tmp_path / "o"))  # fmt: skip
    assert_one_line(code, out, err, r"modified on 2100-01-01, in the future .* --date YYYY-MM-DD")


def _bad_csv(tmp_path: Path, text: str, cloud: str = "aws") -> Path:
    d = tmp_path / cloud
    d.mkdir(exist_ok=True)
    (d / "vms.csv").write_text(text, encoding="utf-8")
    return d / "vms.csv"


HEADER = "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Price,SpotPrice,Region\n"


@pytest.mark.parametrize(("text", "pattern"), [
    ("InstanceType,AcceleratorName,Price\np5,H100,1\n", r"vms\.csv: header: missing column\(s\) AcceleratorCount"),
    (HEADER + "p5.48xlarge,H100,8,192,2048,fifty,,us-east-1\n", r"line 2: Price: 'fifty' is not a number"),
    (HEADER + "p5.48xlarge,H100,8,192,2048,-1,,us-east-1\n", r"line 2: Price: '-1'; a finite number >= 0"),
    (HEADER + "p5.48xlarge,H100,,192,2048,55,,us-east-1\n", r"line 2: AcceleratorCount: empty"),
    (HEADER + "p3.2xlarge,V100,1,8,61,3.06,,us-east-1\n", r"no offer maps to a catalog GPU .*V100 16 GiB"),
    (HEADER, r"no offer maps to a catalog GPU \(0 offers read; no priced GPU offers\)"),
])  # fmt: skip
def test_bad_skypilot_file_one_line(tmp_path, monkeypatch, capsys, text, pattern) -> None:
    path = _bad_csv(tmp_path, text)
    out = tmp_path / "o"
    out.mkdir()
    (out / "prices.csv").write_text("previous\n")
    code, stdout, err = _import(tmp_path, monkeypatch, capsys, "--from", "skypilot-catalog", str(path),
                                "--out", str(out))  # fmt: skip
    assert_one_line(code, stdout, err, pattern)
    assert (out / "prices.csv").read_text() == "previous\n"  # a failed import leaves the old file


def test_bad_arguments_one_line(tmp_path, monkeypatch, capsys) -> None:
    _bad_csv(tmp_path, (ROOT / "aws" / "vms.csv").read_text(), cloud="mine")
    csv_file = ROOT / "aws" / "vms.csv"
    cases = [
        (["--from", "skypilot", str(ROOT), "--out", str(tmp_path / "o")], r"--from='skypilot' not allowed"),
        (["--from", "skypilot-catalog", "--out", str(tmp_path / "o")], r"PATH is required"),
        (["--from", "gpuhunt", str(ROOT), "--out", str(tmp_path / "o")], r"takes no PATH"),
        (["--from", "skypilot-catalog", str(tmp_path / "nope.csv"), "--out", str(tmp_path / "o")], r"file not found"),
        (["--from", "skypilot-catalog", str(tmp_path), "--out", str(tmp_path / "o")],
         r"'mine' is not a SkyPilot cloud .* --provider NAME"),
        (["--from", "skypilot-catalog", str(csv_file), "--out", str(tmp_path / "o"), "--date", "2026-13-01"],
         r"--date='2026-13-01': not a date"),
        (["--from", "skypilot-catalog", str(csv_file), "--out", str(tmp_path / "o"), "--date", "2999-01-01"],
         r"--date=2999-01-01: in the future"),
        (["--from", "skypilot-catalog", str(csv_file), "--out", str(tmp_path / "x" / "y")],
         r"--out=.*parent directory .* does not exist"),
        (["--from", "skypilot-catalog", str(csv_file), "--out", str(tmp_path / "o"), "--provider", "aws,gcp"],
         r"--provider=aws,gcp: give one cloud"),
        (["--from", "skypilot-catalog", str(csv_file), "--out", str(tmp_path / "o"), "--provider", " , "],
         r"--provider: empty"),
        (["--from", "skypilot-catalog", str(ROOT), "--out", str(tmp_path / "o"), "--provider", "aws"],
         r"--provider=aws: names the cloud of one vms.csv, and PATH=.* holds 4"),
        (["--from", "skypilot-catalog", str(tmp_path / "empty"), "--out", str(tmp_path / "o")], r"file not found"),
    ]  # fmt: skip
    for args, pattern in cases:
        code, out, err = _import(tmp_path, monkeypatch, capsys, *args)
        assert_one_line(code, out, err, pattern)
    assert not (tmp_path / "o").exists()


def test_provider_names_a_directory(tmp_path, monkeypatch, capsys) -> None:
    path = _bad_csv(tmp_path, (ROOT / "aws" / "vms.csv").read_text(), cloud="mine")
    code, _, err = _import(tmp_path, monkeypatch, capsys, "--from", "skypilot-catalog", str(path), "--provider",
                           "aws", "--out", str(tmp_path / "o"))  # fmt: skip
    assert code == 0, err
    assert {r["provider"] for r in _rows(tmp_path / "o" / "prices.csv")} == {"AWS us-east-1 (via SkyPilot catalog)"}


def test_refuses_to_overwrite_its_input(tmp_path, monkeypatch, capsys) -> None:
    """A vms.csv saved as aws/prices.csv, imported with --out aws: the output would be the input."""
    d = tmp_path / "aws"
    d.mkdir()
    src = d / "prices.csv"
    shutil.copy(ROOT / "aws" / "vms.csv", src)
    before = src.read_bytes()
    code, out, err = _import(tmp_path, monkeypatch, capsys, "--from", "skypilot-catalog", str(src), "--out", str(d))
    assert_one_line(code, out, err, r"is one of this command's inputs")
    assert src.read_bytes() == before


def test_reimport_replaces_the_file_atomically(imported, tmp_path, monkeypatch, capsys) -> None:
    out, _ = imported
    code, _, err = _import(tmp_path, monkeypatch, capsys, "--from", "skypilot-catalog", str(ROOT / "runpod"),
                           "--out", str(out), "--date", "2026-11-30")  # fmt: skip
    assert code == 0, err
    assert {r["provider"].split()[0] for r in _rows(out / "prices.csv")} == {"RunPod"}
    assert [p.name for p in out.iterdir()] == ["prices.csv"]  # no temporary file left


_SKY_READER = """
import json, sys
import pandas as pd
from sky.catalog import common
out = []
for cloud, path in zip(sys.argv[1::2], sys.argv[2::2]):
    acc = common.list_accelerators_impl(cloud, pd.read_csv(path), gpus_only=True, name_filter=None,
                                        region_filter=None, quantity_filter=None, all_regions=True)
    for infos in acc.values():
        for i in infos:
            for kind, usd in (("on-demand", i.price), ("spot", i.spot_price)):
                if usd == usd:  # not NaN
                    out.append([cloud, i.instance_type, i.accelerator_name, i.accelerator_count, usd, kind, i.region,
                                i.device_memory])
print(json.dumps(out))
"""


def test_fixtures_read_alike_by_skypilot(tmp_path) -> None:
    """SkyPilot's own catalog reader (sky.catalog.common.list_accelerators_impl, pandas) finds in the fixture files
    the offers this importer reads, with the same per-GPU memory from GpuInfo: the fixtures are SkyPilot's format."""
    pytest.importorskip("sky", reason="skypilot is the optional 'export' extra (pip install '.[export]')")
    clouds = ("lambda", "aws", "runpod")
    args = [a for c in clouds for a in (c, str(ROOT / c / "vms.csv"))]
    home = tmp_path / "home"  # SkyPilot writes ~/.sky on import
    home.mkdir()
    import subprocess

    proc = subprocess.run([sys.executable, "-c", _SKY_READER, *args], capture_output=True, text=True, timeout=300,
                          env={"HOME": str(home), "PATH": "/usr/bin:/bin"})  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    theirs = {(c, it, float(k), round(u, 6), kind, r, m) for c, it, _name, k, u, kind, r, m
              in json.loads(proc.stdout.strip().splitlines()[-1])}  # fmt: skip
    ours = {(c, o.instance_type, o.gpu_count, round(o.usd_per_hour, 6), o.kind, o.region, o.gpu_memory_gib)
            for c in clouds for o in pi.read_skypilot(ROOT / c / "vms.csv", c)}  # fmt: skip
    assert ours == theirs
    assert len(ours) == 31  # Lambda 7 instances x 2 regions, RunPod 7 on-demand + 3 spot, AWS 7 GPU instances


# ---- the mapping rule -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "gib", "provider", "instance", "expect"), [
    ("H100", 94, "azure", "Standard_NC40ads_H100_v5", "h100-nvl"),  # NC H100 v5: H100 NVL (Azure docs)
    ("H100", 80, "azure", "Standard_ND96isr_H100_v5", "h100-sxm"),  # ND H100 v5: HGX H100
    ("H100", 80, "gcp", "a3-highgpu-8g", "h100-sxm"),
    ("H100MEGA", None, "gcp", "a3-megagpu-8g", "h100-sxm"),
    ("A100", 80, "azure", "Standard_NC24ads_A100_v4", "a100-80gb-pcie"),
    ("H200", 141, "aws", "p5e.48xlarge", "h200-sxm"),
    ("H200NVL", 141, "vastai", "123", "h200-nvl"),
    ("RTX4090", 24, "vastai", "123", "rtx-4090"),
    ("MI300X", 192, "runpod", "8x_MI300X_SECURE", "mi300x"),
])  # fmt: skip
def test_resolve_gpu_maps(name, gib, provider, instance, expect) -> None:
    assert pi.resolve_gpu(name, gib, provider, instance, catalog=Catalog.load(None)) == (expect, "")


@pytest.mark.parametrize(("name", "gib", "provider", "instance", "why"), [
    ("H100", 80, "lambda", "gpu_1x_h100", "ambiguous"),  # SXM or PCIe: not said
    ("H100", 80, "someone", "box-8", "ambiguous"),
    ("H100", 40, "aws", "p5.48xlarge", "memory"),  # no 40 GB H100 exists
    ("A40", 48, "runpod", "1x_A40_SECURE", "unknown"),
    ("V100", 32, "azure", "Standard_NC6s_v3_pcie", "form"),  # the catalog's V100 is the SXM2 part
])  # fmt: skip
def test_resolve_gpu_refuses(name, gib, provider, instance, why) -> None:
    gpu, reason = pi.resolve_gpu(name, gib, provider, instance, catalog=Catalog.load(None))
    assert gpu is None and reason.startswith(why), reason


def test_every_family_target_is_a_catalog_gpu() -> None:
    ids = set(Catalog.load(None).gpus)
    assert {i for cands in pi.FAMILIES.values() for i, _ in cands} <= ids


# ---- gpuhunt ------------------------------------------------------------------------------------------------------

ITEM_FIELDS = ("provider", "instance_name", "location", "price", "cpu", "memory", "gpu_count", "gpu_name",
               "gpu_memory", "spot", "disk_size", "gpu_vendor")  # gpuhunt 0.1.34's CatalogItem, in order


def _fake_gpuhunt(calls: list[dict]) -> types.ModuleType:
    """A stand-in for gpuhunt with its ``query(**filters) -> list[CatalogItem]`` shape (gpuhunt 0.1.34,
    gpuhunt/_internal/default.py and models.py) over the recorded items."""
    item = dataclasses.make_dataclass("CatalogItem", ITEM_FIELDS)
    items = [item(**d) for d in json.loads((FIX / "gpuhunt_items.json").read_text())]
    mod = types.ModuleType("gpuhunt")

    def query(**kwargs):
        calls.append(kwargs)
        provs = kwargs.get("provider")
        least = kwargs.get("min_gpu_count", 0)
        return [i for i in items if (not provs or i.provider in provs) and i.gpu_count >= least]

    mod.query = query  # type: ignore[attr-defined]
    mod.__version__ = "0.1.34"  # type: ignore[attr-defined]
    return mod


def test_gpuhunt_import(tmp_path, monkeypatch, capsys) -> None:
    calls: list[dict] = []
    monkeypatch.setitem(sys.modules, "gpuhunt", _fake_gpuhunt(calls))
    code, stdout, err = _import(tmp_path, monkeypatch, capsys, "--from", "gpuhunt", "--out", str(tmp_path / "g"))
    assert code == 0, err
    assert calls == [{"provider": None, "min_gpu_count": 1}]
    rows = _rows(tmp_path / "g" / "prices.csv")
    got = {(r["gpu_id"], r["kind"], r["provider"]): float(r["usd"]) for r in rows}
    assert got == {
        ("h100-sxm", "on-demand", "AWS us-east-1 (via gpuhunt)"): pytest.approx(55.04 / 8),
        ("l4", "on-demand", "AWS us-east-1 (via gpuhunt)"): pytest.approx(0.8048),
        ("h100-nvl", "on-demand", "Azure eastus (via gpuhunt)"): pytest.approx(6.98),
        ("h100-pcie", "on-demand", "Lambda us-east-1 (via gpuhunt)"): pytest.approx(2.49),
        ("rtx-4090", "spot", "Vast.ai us-texas (via gpuhunt)"): pytest.approx(0.35),
    }
    assert all(r["source"] == "gpuhunt 0.1.34 query (providers' public offer lists)" for r in rows)
    flat = " ".join(stdout.split())
    assert "A100 40 GiB: ambiguous" in flat and "RTX3060 12 GiB: unknown" in flat
    code, _, err = _import(tmp_path, monkeypatch, capsys, "--from", "gpuhunt", "--provider", "aws,vastai",
                           "--out", str(tmp_path / "g2"))  # fmt: skip
    assert code == 0, err
    assert calls[-1] == {"provider": ["aws", "vastai"], "min_gpu_count": 1}
    assert {r["provider"].split()[0] for r in _rows(tmp_path / "g2" / "prices.csv")} == {"AWS", "Vast.ai"}


def test_gpuhunt_missing_says_how_to_install(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setitem(sys.modules, "gpuhunt", None)  # import gpuhunt raises ImportError
    code, out, err = _import(tmp_path, monkeypatch, capsys, "--from", "gpuhunt", "--out", str(tmp_path / "g"))
    assert_one_line(code, out, err, r"gpuhunt library is not installed; install it with: pip install "
                                    r"'scaleright\[prices\]'")  # fmt: skip


def test_gpuhunt_failure_one_line(tmp_path, monkeypatch, capsys) -> None:
    mod = types.ModuleType("gpuhunt")

    def query(**kwargs):
        raise ConnectionError("Max retries exceeded with url: /catalog.zip\n(Caused by NameResolutionError)")

    mod.query = query  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "gpuhunt", mod)
    code, out, err = _import(tmp_path, monkeypatch, capsys, "--from", "gpuhunt", "--out", str(tmp_path / "g"))
    assert_one_line(code, out, err, r"gpuhunt query failed: ConnectionError: Max retries exceeded")


def test_real_gpuhunt_api(monkeypatch) -> None:
    """Against the installed gpuhunt (the 'prices' extra): the filters scaleright passes are parameters of its
    ``Catalog.query``, and its own ``CatalogItem`` records (network replaced by the recorded items) map as above."""
    gpuhunt = pytest.importorskip("gpuhunt", reason="gpuhunt is the optional 'prices' extra: pip install "
                                  "'scaleright[prices]'")  # fmt: skip
    import inspect

    params = inspect.signature(gpuhunt.Catalog.query).parameters
    assert {"provider", "min_gpu_count"} <= set(params)
    assert set(ITEM_FIELDS) <= {f.name for f in dataclasses.fields(gpuhunt.CatalogItem)}
    records = json.loads((FIX / "gpuhunt_items.json").read_text())
    items = [gpuhunt.CatalogItem(**{**d, "gpu_vendor": gpuhunt.AcceleratorVendor(d["gpu_vendor"])
                                    if d["gpu_vendor"] else None}) for d in records]  # fmt: skip
    seen: list[dict] = []

    def query(**kwargs):
        inspect.signature(gpuhunt.Catalog.query).bind(None, **kwargs)  # a filter it does not take raises here
        seen.append(kwargs)
        return items

    monkeypatch.setattr(gpuhunt, "query", query)
    offers, source = pi.query_gpuhunt(["aws"])
    from importlib.metadata import version

    assert seen and source.startswith(f"gpuhunt {version('gpuhunt')} query")
    res = pi.price_rows(offers, catalog=Catalog.load(None), date="2026-11-30", source=source, origin="gpuhunt")
    assert {r.gpu_id for r in res.rows} == {"h100-sxm", "l4", "h100-nvl", "h100-pcie", "rtx-4090"}


# ---- the selection rule as a property ---------------------------------------------------------------------------

_OFFER = st.builds(
    pi.Offer, provider=st.sampled_from(["aws", "lambda"]), instance_type=st.sampled_from(["p5.48xlarge", "g6.xlarge"]),
    accelerator=st.sampled_from(["H100", "L4"]), gpu_count=st.sampled_from([1.0, 2.0, 4.0, 8.0]),
    gpu_memory_gib=st.none(), usd_per_hour=st.floats(0.01, 500), kind=st.sampled_from(["on-demand", "spot"]),
    region=st.sampled_from(["us-east-1", "us-west-2"]),
)  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(st.lists(_OFFER, min_size=1, max_size=12))
def test_each_row_is_the_cheapest_offer_per_gpu_hour(offers) -> None:
    """Per (GPU, kind, provider, region): the row's price is instance price / GPU count of one offer, and no offer of
    that key is cheaper per GPU-hour. (An H100 on AWS's p5 is SXM by its family; L4 has one form; any other H100
    names no form and is refused.)"""
    res = pi.price_rows(offers, catalog=Catalog.load(None), date="2026-11-30", source="s", origin="test")
    per_key: dict[tuple, list[float]] = {}
    for o in offers:
        if o.accelerator == "L4":
            gid = "l4"
        elif o.provider == "aws" and o.instance_type == "p5.48xlarge":
            gid = "h100-sxm"
        else:
            continue  # an H100 whose instance names no form
        per_key.setdefault((gid, o.kind, o.provider, o.region), []).append(o.usd_per_hour / o.gpu_count)
    got = {(r.gpu_id, r.kind, r.provider.split()[0].lower(), r.provider.split()[1]): r.usd for r in res.rows}
    assert set(got) == set(per_key)
    for k, usd in got.items():
        assert usd == pytest.approx(min(per_key[k]), rel=1e-6, abs=1e-6)
    assert len(res.rows) + sum(res.skipped.values()) <= len(offers)
