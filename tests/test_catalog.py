"""The catalog against the reference data it was built from, and the user-override rules.

Expected values are read from validation/reference/ (the repository's copy of the project's shared reference data)
with the csv/json modules and mapped by hand here, never from the package's own data files, so a copying slip in
gpus.yaml, prices.csv or models/ fails a test.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

import scaleright.catalog as catalog_pkg
from scaleright.catalog import (
    ENV_VAR,
    Catalog,
    find_price,
    get_gpu,
    get_model_entry,
    list_gpus,
    list_prices,
    load_model_config,
)
from scaleright.catalog.store import price_rows_merged
from scaleright.errors import CatalogFileError, InputError, UnknownNameError
from validation import reference_dir

REF = reference_dir()  # validation/reference in this repository (or $SCALERIGHT_REFERENCE_DIR)
GIB_IN_GB = 1.073741824

# the csv's `name` -> canonical id (an independent mapping: the test does not ask the catalog)
CSV_NAME_TO_ID = {
    "NVIDIA V100 32GB SXM2": "v100-32gb",
    "NVIDIA A100 40GB SXM": "a100-40gb",
    "NVIDIA A100 80GB SXM": "a100-80gb",
    "NVIDIA A100 40GB PCIe": "a100-40gb-pcie",
    "NVIDIA A100 80GB PCIe": "a100-80gb-pcie",
    "NVIDIA H100 SXM": "h100-sxm",
    "NVIDIA H100 PCIe": "h100-pcie",
    "NVIDIA H100 NVL": "h100-nvl",
    "NVIDIA H200 SXM": "h200-sxm",
    "NVIDIA H200 NVL": "h200-nvl",
    "NVIDIA B200 (HGX/DGX)": "b200",
    "NVIDIA GB200 (per GPU)": "gb200",
    "NVIDIA L40S": "l40s",
    "NVIDIA L4": "l4",
    "NVIDIA A10": "a10",
    "NVIDIA A10G": "a10g",
    "NVIDIA T4": "t4",
    "NVIDIA RTX 3090": "rtx-3090",
    "NVIDIA RTX 4090": "rtx-4090",
    "NVIDIA RTX 5090": "rtx-5090",
    "NVIDIA RTX 6000 Ada": "rtx-6000-ada",
    "AMD Instinct MI250X": "mi250x",
    "AMD Instinct MI300X": "mi300x",
    "AMD Instinct MI325X": "mi325x",
    "AMD Instinct MI355X": "mi355x",
    "Intel Gaudi 2": "gaudi2",
    "Intel Gaudi 3": "gaudi3",
    "Google TPU v4": "tpu-v4",
    "Google TPU v5e": "tpu-v5e",
    "Google TPU v5p": "tpu-v5p",
    "Google TPU v6e (Trillium)": "tpu-v6e",
    "AWS Trainium (Trn1)": "trn1",
    "AWS Trainium2 (Trn2)": "trn2",
    "AWS Inferentia2": "inf2",
}
CANONICAL_IDS = (  # noqa: SIM905 (the ids read best as one string)
    "v100-32gb a100-40gb a100-80gb a100-40gb-pcie a100-80gb-pcie h100-sxm h100-pcie h100-nvl h200-sxm h200-nvl b200 "
    "gb200 l40s l4 a10 a10g t4 rtx-3090 rtx-4090 rtx-5090 rtx-6000-ada mi250x mi300x mi325x mi355x gaudi2 gaudi3 "
    "tpu-v4 tpu-v5e tpu-v5p tpu-v6e trn1 trn2 inf2"
).split()
# Parts added from datasheets (issue 9; not rows of gpu_specs.csv): id -> (memory GiB, TB/s, dense bf16 TFLOP/s,
# dense fp8 TFLOP/s or None, TDP W or None), read by hand from the datasheet or sheet named (sparse figures halved).
DATASHEET_GPUS = {
    "h800": (80, 3.35, 1979 / 2, 3958 / 2, 700.0),  # NVIDIA H800 datasheet, SXM5 column
    "h20": (96, 4.0, 148.0, 296.0, 400.0),  # partner sheet as reported by SemiAnalysis 2023-11 (no NVIDIA datasheet)
    "gh200": (96, 4.0, 1979 / 2, 3958 / 2, 1000.0),  # NVIDIA GH200 datasheet, HBM3 variant; module maximum power
    "gb300": (288, 576 / 72, 360_000 / 72 / 2, 720_000 / 72 / 2, None),  # GB300 NVL72 datasheet, per rack / 72
    "rtx-pro-6000": (96, 1.792, 4000 / 2 / 4, 4000 / 2 / 2, 600.0),  # datasheet's 4,000 FP4 AI TOPS (sparse)
    "l40": (48, 0.864, 362 / 2, 724 / 2, 300.0),  # NVIDIA L40 datasheet
    "rtx-a6000": (48, 0.768, 309.7 / 2, None, 300.0),  # NVIDIA RTX A6000 datasheet, GA102 whitepaper App. A
}


def _spec_rows() -> list[dict[str, str]]:
    with open(REF / "gpu_specs.csv", newline="") as f:
        return list(csv.DictReader(f))


def _price_rows() -> list[dict[str, str]]:
    with open(REF / "gpu_prices.csv", newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def builtin() -> Catalog:
    return Catalog.load()


@pytest.fixture
def no_env(monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)


def _write_gpus(d: Path, entries: list[dict]) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / "gpus.yaml").write_text(yaml.safe_dump(entries, sort_keys=False))
    return d


# ---- accelerators --------------------------------------------------------------------------------------------


def test_public_api_is_exported():
    for name in catalog_pkg.__all__:
        assert hasattr(catalog_pkg, name), name


def test_catalog_holds_exactly_the_canonical_ids(builtin):
    assert sorted(builtin.gpus) == sorted(CANONICAL_IDS + list(DATASHEET_GPUS))
    assert len(_spec_rows()) == 34 and set(CSV_NAME_TO_ID) == {r["name"] for r in _spec_rows()}


# Rows where the catalog departs from the csv's bf16 on purpose (issue 9): the expected dense bf16 TFLOP/s, read by
# hand from the datasheet named (sparse figures halved). Every other row must equal the csv.
BF16_CORRECTIONS = {
    "rtx-3090": 71.0,  # NVIDIA GA102 whitepaper App. A: BF16 Tensor with FP32 accumulate 71/142 (the csv: empty)
    "h100-nvl": 1671 / 2,  # NVIDIA H100 datasheet, H100 NVL column: BF16 1,671 TF with sparsity (the csv: SXM's 989)
    "h200-nvl": 1671 / 2,  # NVIDIA H200 datasheet, H200 NVL column: BF16 1,671 TF with sparsity (the csv: SXM's 989)
    "a10g": 70.0,  # AWS G5 A10G table (as shown by Baseten): BF16 70 TF dense (the csv: a gap)
    "mi325x": 1307.4,  # AMD MI325X datasheet: FP16/BF16 1307.4 TF dense (the csv: stas00's rounded 1300)
}


@pytest.mark.parametrize("row", _spec_rows(), ids=lambda r: CSV_NAME_TO_ID[r["name"]])
def test_memory_bandwidth_and_bf16_match_the_reference_csv(builtin, row):
    gpu = builtin.gpu(CSV_NAME_TO_ID[row["name"]])
    # device capacities are binary (datasheet "80 GB" = 80 GiB: powers-of-two HBM stacks and GDDR chips), so every
    # capacity is converted to SI GB; a bandwidth its source gives in GiB/s likewise
    mem = float(row["memory_gb"]) * GIB_IN_GB
    bw = float(row["mem_bandwidth_tbps"])
    bw *= GIB_IN_GB if re.search(rf"\b{round(bw * 1000)} GiB/s", row["source"]) else 1.0
    bf16 = float(row["bf16_dense_tflops"]) if row["bf16_dense_tflops"] else None
    bf16 = BF16_CORRECTIONS.get(gpu.id, bf16)
    assert gpu.memory_gb == pytest.approx(mem, rel=1e-4)
    assert gpu.hbm_bandwidth_tb_per_s == pytest.approx(bw, rel=1e-4)
    assert gpu.dense_tflops["bf16"] == (pytest.approx(bf16) if bf16 is not None else None)
    assert gpu.source.startswith(row["source"])  # a correction appends its datasheet to the csv's source
    assert builtin.gpu(row["name"]).id == gpu.id  # the csv's own name is an alias


@pytest.mark.parametrize("gid", sorted(DATASHEET_GPUS))
def test_datasheet_parts_match_their_sheets(builtin, gid):
    mem_gib, tbps, bf16, fp8, tdp = DATASHEET_GPUS[gid]
    g = builtin.gpu(gid)
    assert g.memory_gb == pytest.approx(mem_gib * GIB_IN_GB, rel=1e-4)
    assert g.hbm_bandwidth_tb_per_s == pytest.approx(tbps)
    assert g.dense_tflops["bf16"] == pytest.approx(bf16, rel=2e-3)
    assert g.dense_tflops["fp8"] == (pytest.approx(fp8, rel=2e-3) if fp8 is not None else None)
    assert g.tdp_w == tdp
    assert "not in validation/reference/gpu_specs.csv" in g.notes  # says where its figures came from instead
    from scaleright.catalog.systems import system_for

    assert gid in system_for(gid).accelerators  # every part has a system to plan on


def test_export_and_ultra_parts_differ_from_their_siblings(builtin):
    """H800 = H100 SXM compute with NVLink cut to 400 GB/s; H20 = a compute-poor, bandwidth-rich GH100; GB300 keeps
    the GB200's bf16/fp8 and raises dense fp4 1.5x (datasheets)."""
    h100, h800, h20 = builtin.gpu("h100-sxm"), builtin.gpu("h800"), builtin.gpu("h20")
    assert h800.dense_tflops == h100.dense_tflops
    assert h800.intra_node_gb_per_s_per_gpu < h100.intra_node_gb_per_s_per_gpu
    assert h20.hbm_bandwidth_tb_per_s > h100.hbm_bandwidth_tb_per_s and h20.dense_tflops["bf16"] < 0.2 * 989
    gb200, gb300 = builtin.gpu("gb200"), builtin.gpu("gb300")
    assert gb300.dense_tflops["bf16"] == gb200.dense_tflops["bf16"]
    assert gb300.dense_tflops["fp4"] == pytest.approx(1.5 * gb200.dense_tflops["fp4"])
    assert [builtin.gpu(n).id for n in ("GB300", "GB200", "B200")] == ["gb300", "gb200", "b200"]


def test_accelerators_without_a_published_tdp_say_so(builtin):
    """Google and AWS publish no TDP for TPU, Trainium or Inferentia chips: the field is empty and the notes say it."""
    for gid in ("tpu-v4", "tpu-v5e", "tpu-v5p", "tpu-v6e", "trn1", "trn2", "inf2"):
        g = builtin.gpu(gid)
        assert g.tdp_w is None and "TDP" in g.notes, gid


def test_every_gpu_has_all_precisions_and_a_sane_node(builtin):
    for g in builtin.gpus.values():
        assert set(g.dense_tflops) == {"fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4"}
        assert g.intra_node_gb_per_s_per_gpu > 0 and g.nic_gbps_per_gpu > 0 and g.gpus_per_node >= 1
        assert g.notes, g.id


def test_sources_flagged_unverified_are_listed(builtin):
    assert "dense_tflops.bf16" in builtin.gpu("l4").unverified and "dense_tflops.bf16" in builtin.gpu("l40s").unverified
    a10g = builtin.gpu("a10g")
    assert "dense_tflops.bf16" in a10g.unverified and "image" in a10g.notes  # read off an image, not a text source
    for gid in ("rtx-5090",):
        assert "dense_tflops.fp8" in builtin.gpu(gid).unverified and "derived" in builtin.gpu(gid).notes


def test_corrections_name_their_datasheet(builtin):
    """Each issue-9 correction carries the datasheet it came from and says what it replaced."""
    sheets = (("rtx-3090", "GA102 GPU Architecture whitepaper"), ("h100-nvl", "H100 Tensor Core GPU datasheet"),
              ("h200-nvl", "H200 Tensor Core GPU datasheet"), ("mi325x", "MI325X accelerator datasheet"))
    for gid, sheet in sheets:
        g = builtin.gpu(gid)
        assert sheet in g.source and "correction" in g.notes, gid


def test_nvl_parts_have_their_own_peaks_and_power(builtin):
    """H100 NVL / H200 NVL are PCIe cards at 400 / 600 W: their datasheets' per-GPU rates, below the 700 W SXM's."""
    for nvl, sxm, watts in (("h100-nvl", "h100-sxm", 400.0), ("h200-nvl", "h200-sxm", 600.0)):
        a, b = builtin.gpu(nvl), builtin.gpu(sxm)
        assert a.dense_tflops["bf16"] == pytest.approx(835.5) and a.dense_tflops["fp8"] == pytest.approx(1670.5)
        assert a.dense_tflops["bf16"] < b.dense_tflops["bf16"] and a.tdp_w == watts < b.tdp_w


def test_geforce_rates_share_the_fp32_accumulate_basis(builtin):
    """Training runs FP32 accumulate; a GeForce card does it at half its FP16-accumulate headline. Every precision of
    a card must be on that one basis: fp16 = bf16, fp8 = 2 x bf16 (Ada whitepaper App. A: 4090 FP8 and BF16 with FP32
    accumulate 330.3 and 165.2). The RTX 3090's bf16 is 71, not the FP16-accumulate 142 (GA102 whitepaper)."""
    assert builtin.gpu("rtx-3090").dense_tflops["bf16"] == 71.0
    for gid in ("rtx-3090", "rtx-4090", "rtx-5090"):
        d = builtin.gpu(gid).dense_tflops
        assert d["fp16"] == d["bf16"], gid
        if d["fp8"]:
            assert d["fp8"] == pytest.approx(2 * d["bf16"], rel=0.01), gid
    assert builtin.gpu("rtx-3090").dense_tflops["bf16"] < builtin.gpu("rtx-4090").dense_tflops["bf16"]


def test_geforce_parts_state_their_fp16_accumulate_rate_from_the_reference_csv(builtin):
    """The FP16-accumulate rate (what llama.cpp's CUBLAS_COMPUTE_16F GEMMs reach) is the csv's figure: the RTX 3090's
    fp16 column (142, 'FP16 tensor dense with FP16 accumulate'), the RTX 4090's 'FP16 (FP16 acc)' in its note, the
    RTX 5090's fp8 column halved (838.4: the FP16-accumulate fp8 rate, twice the fp16 one). Each is twice the
    card's FP32-accumulate fp16 rate; every other part states none (data-center and professional parts run both
    accumulators at one rate)."""
    rows = {r["name"]: r for r in _spec_rows()}
    r3090, r4090, r5090 = (rows[f"NVIDIA RTX {n}"] for n in ("3090", "4090", "5090"))
    assert "FP16 accumulate" in r3090["dense_note"]
    want = {"rtx-3090": float(r3090["fp16_dense_tflops"]),
            "rtx-4090": float(re.search(r"FP16 \(FP16 acc\) ([\d.]+)", r4090["dense_note"]).group(1)),
            "rtx-5090": float(r5090["fp8_dense_tflops"]) / 2}  # fmt: skip
    for gid, rate in want.items():
        g = builtin.gpu(gid)
        assert g.fp16_accumulate_tflops == pytest.approx(rate, rel=0.001), gid
        assert g.fp16_tflops("fp16") == g.fp16_accumulate_tflops
        assert g.fp16_tflops("fp32") == g.dense_tflops["fp16"]
        assert g.fp16_accumulate_tflops == pytest.approx(2 * g.dense_tflops["fp16"], rel=0.001), gid
    assert "fp16_accumulate_tflops" in builtin.gpu("rtx-5090").unverified  # not read from a stored whitepaper copy
    others = [g.id for g in builtin.gpus.values() if g.id not in want and g.fp16_accumulate_tflops is not None]
    assert others == []
    assert builtin.gpu("h100-sxm").fp16_tflops("fp16") == builtin.gpu("h100-sxm").dense_tflops["fp16"]


def test_an_fp16_accumulate_rate_below_the_fp16_rate_is_refused(builtin):
    from pydantic import ValidationError

    data = builtin.gpu("rtx-4090").model_dump()
    with pytest.raises(ValidationError, match=r"fp16_accumulate_tflops=100 .* must be at least it"):
        type(builtin.gpu("rtx-4090")).model_validate({**data, "fp16_accumulate_tflops": 100.0})
    with pytest.raises(ValueError, match=r"accumulate='fp8' not allowed; allowed: fp32, fp16"):
        builtin.gpu("rtx-4090").fp16_tflops("fp8")


def test_no_part_has_fp8_above_twice_its_bf16(builtin):
    """Tensor cores double their rate per halving of the operand width at most: an fp8 figure above 2 x bf16 mixes
    accumulate bases or sparse and dense figures (the 5090's 838 vs 209.5 did)."""
    for g in builtin.gpus.values():
        d = g.dense_tflops
        if d["fp8"] and d["bf16"]:
            assert d["fp8"] <= 2 * d["bf16"] * 1.03, g.id  # 3 %: the L40S sheet's 733 vs 2 x 362.05


def test_parts_without_bf16_say_so(builtin):
    """Volta and Turing have no bf16 tensor cores: the rate is empty and the notes say so in their first line."""
    for gid in ("v100-32gb", "t4"):
        g = builtin.gpu(gid)
        assert g.dense_tflops["bf16"] is None and g.dense_tflops["fp16"]
        assert g.notes.startswith("no bf16 tensor rate"), gid


def test_pcie_only_parts_use_the_pcie_generation_bandwidth(builtin):
    assert builtin.gpu("t4").intra_node_gb_per_s_per_gpu == pytest.approx(15.75)
    assert builtin.gpu("l40s").intra_node_gb_per_s_per_gpu == pytest.approx(31.5)
    assert builtin.gpu("h100-pcie").intra_node_gb_per_s_per_gpu == pytest.approx(63.0)


def test_bidirectional_link_figures_are_halved(builtin):
    spec = {CSV_NAME_TO_ID[r["name"]]: r for r in _spec_rows()}
    for gid in ("h100-nvl", "tpu-v5e", "tpu-v6e"):
        assert spec[gid]["intra_node_bw_direction"].startswith("bidirectional")
        half = float(spec[gid]["intra_node_bw_gbps_per_gpu"]) / 2
        assert builtin.gpu(gid).intra_node_gb_per_s_per_gpu == pytest.approx(half)
    assert builtin.gpu("h100-sxm").intra_node_gb_per_s_per_gpu == pytest.approx(450.0)  # csv: unidirectional


@pytest.mark.parametrize(
    "alias, gid",
    [
        ("H100", "h100-sxm"),
        ("h100-sxm5-80gb", "h100-sxm"),
        ("H100 SXM", "h100-sxm"),
        ("A100-SXM4-80GB", "a100-80gb"),
        ("A100", "a100-80gb"),
        ("rtx 4090", "rtx-4090"),
        ("4090", "rtx-4090"),
        ("RTX_4090", "rtx-4090"),
        ("MI300X", "mi300x"),
        ("tpu v5e", "tpu-v5e"),
    ],
)
def test_aliases_resolve(builtin, alias, gid):
    assert builtin.gpu(alias).id == gid


def test_get_gpu_and_list_gpus_use_the_default_catalog(no_env):
    assert get_gpu("H100").id == "h100-sxm"
    assert len(list_gpus()) == len(CANONICAL_IDS) + len(DATASHEET_GPUS)


def test_unknown_gpu_names_the_closest(builtin):
    with pytest.raises(UnknownNameError, match=r"unknown GPU 'H1OO'; closest: .*H100"):
        builtin.gpu("H1OO")


def test_no_alias_names_two_gpus(builtin):
    seen: dict[str, str] = {}
    for g in builtin.gpus.values():
        for n in {catalog_pkg.normalize_name(x) for x in g.names()}:
            assert seen.setdefault(n, g.id) == g.id, n


@given(data=st.data())
def test_case_and_separators_do_not_matter(data):
    """Any name of any GPU, re-cased and with spaces/underscores/hyphens swapped, resolves to that GPU."""
    cat = Catalog.load()
    gpu = data.draw(st.sampled_from(list(cat.gpus.values())))
    alias = data.draw(st.sampled_from(gpu.names()))
    seps = data.draw(st.lists(st.sampled_from([" ", "_", "-", "  "]), min_size=20, max_size=20))
    mutated = "".join(seps.pop() if c in " _-" else c for c in alias)
    mutated = "".join(data.draw(st.sampled_from([c.lower(), c.upper()])) for c in mutated)
    assert cat.gpu(mutated).id == gpu.id


# ---- prices --------------------------------------------------------------------------------------------------


def test_every_reference_price_row_is_kept(builtin):
    ref = _price_rows()
    assert len(builtin.prices) == len(ref)
    for r, p in zip(ref, builtin.prices, strict=True):
        assert (p.provider, p.sku, p.source) == (r["provider_or_market"], r["sku_or_config"], r["source"])
        floor = any(w in (r["source"] + r["notes"]).lower() for w in ("starts from", "starting at"))
        if r["usd"] and floor:  # a "starts from" price is a lower bound, not an offer: kept as usd_low only
            assert p.usd is None and p.usd_low == pytest.approx(float(r["usd"])) and p.price is None
            assert "floor" in p.notes
        elif r["usd"]:
            assert p.usd == pytest.approx(float(r["usd"]))
        if r["unit"] == "usd_per_server":  # converted to per GPU
            assert p.unit == "usd_per_gpu" and "derived: /8" in p.notes
            assert p.usd_high == pytest.approx(float(r["usd_high"]) / 8)
        if "reserved" in r["unit"]:
            assert p.kind == "reserved" and "reserved term" in p.notes
        if "serverless" in r["provider_or_market"].lower():  # "Modal (serverless; CPU/RAM extra)": per second
            assert p.kind == "serverless" and "CPU and RAM billed extra" in p.notes
    assert {p.kind for p in builtin.prices} <= {"on-demand", "spot", "marketplace", "reserved", "serverless",
                                                "purchase"}


def test_seed_article_rtx_4090_marketplace_price_is_present(builtin):
    rows = list_prices("RTX 4090", "marketplace", catalog=builtin)
    seed = [r for r in rows if r.usd == 0.18]
    assert seed and seed[0].unit == "usd_per_gpu_hour" and "Seed article" in seed[0].source


def _user_prices(d: Path, rows: list[tuple]) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    head = "gpu_id,kind,usd,usd_low,usd_high,unit,provider,sku,date,source,notes\n"
    body = "".join(",".join(map(str, r)) + ",src,\n" for r in rows)
    (d / "prices.csv").write_text(head + body)
    return d


# the offer-selection rule (cheapest valid offer, fresh first) is tested in test_prices.py


def test_find_price_midpoint_of_a_range_says_so(tmp_path):
    d = _user_prices(tmp_path / "c", [("l4", "spot", "", 0.2, 0.4, "usd_per_gpu_hour", "p", "", "2026-01-02")])
    row = find_price("L4", "spot", catalog=Catalog.load(d))
    assert row.usd == pytest.approx(0.3) and row.price_basis == "midpoint of low/high"


def test_find_price_without_a_row_lists_the_kinds_that_exist(builtin):
    with pytest.raises(InputError, match=r"no spot price for GPU 'mi300x'; kinds with a price: purchase"):
        find_price("MI300X", "spot", catalog=builtin)
    with pytest.raises(InputError, match=r"price kind 'rent' is not one of"):
        find_price("H100", "rent", catalog=builtin)
    with pytest.raises(UnknownNameError, match="unknown GPU"):
        find_price("H999", "on-demand", catalog=builtin)


# ---- models --------------------------------------------------------------------------------------------------


def _reference_configs() -> list:
    return sorted((REF / "model_configs").glob("*.json"))


@pytest.mark.parametrize("path", _reference_configs(), ids=lambda p: p.stem)
def test_every_reference_model_config_loads_verbatim(builtin, path):
    cfg, entry = load_model_config(path.stem, catalog=builtin)
    assert cfg == json.loads(path.read_text()) and entry is not None and entry.name == path.stem


def test_every_catalog_entry_loads(builtin):
    assert len(builtin.models) == 33  # the 32 reference configs and gpt3-175b
    for name, entry in builtin.models.items():
        cfg, e = load_model_config(name.upper(), catalog=builtin)
        assert e == entry and isinstance(cfg, dict)


def test_gpt3_is_the_paper_shape(builtin):
    cfg, entry = load_model_config("GPT-3-175B", catalog=builtin)
    shape = (cfg["model_type"], cfg["n_layer"], cfg["n_embd"], cfg["n_head"], cfg["n_ctx"], cfg["n_inner"])
    assert shape == ("gpt2", 96, 12288, 96, 2048, None)
    assert entry.published_params_total_b == 175.0 and "Brown" in entry.published_params_source


def test_model_aliases_and_published_counts(builtin):
    assert get_model_entry("mistral-7b", catalog=builtin).name == "mistral-7b-v0.3"
    assert get_model_entry("Phi-3-Mini", catalog=builtin).name == "phi-3-mini-4k"
    mixtral = get_model_entry("mixtral-8x7b", catalog=builtin)
    assert (mixtral.published_params_total_b, mixtral.published_params_active_b) == (47.0, 13.0)
    assert get_model_entry("qwen2.5-14b", catalog=builtin).published_params_total_b is None  # "not read"
    ds = get_model_entry("deepseek-ai/DeepSeek-V3", catalog=builtin)
    assert (ds.published_params_total_b, ds.published_params_active_b) == (671.0, 37.0)


def test_returned_config_is_a_copy(builtin):
    cfg, _ = load_model_config("gpt2", catalog=builtin)
    cfg["n_layer"] = -1
    assert load_model_config("gpt2", catalog=builtin)[0]["n_layer"] == 12


def test_config_path_loads_without_entry(tmp_path):
    p = tmp_path / "config.json"
    p.write_text('{"model_type": "llama", "hidden_size": 8}')
    assert load_model_config(p) == ({"model_type": "llama", "hidden_size": 8}, None)
    assert load_model_config(str(tmp_path))[1] is None  # a directory holding config.json


def test_malformed_config_json_names_file_and_position(tmp_path):
    p = tmp_path / "config.json"
    p.write_text('{\n  "model_type": "llama",\n  "hidden_size": ,\n}')
    with pytest.raises(CatalogFileError, match=r"config\.json: not valid JSON \(line 3, column 18"):
        load_model_config(p)


def test_unknown_model_names_the_closest(builtin):
    with pytest.raises(UnknownNameError, match=r"unknown model 'lama-3.1-70b'; closest: llama-3.1-70b"):
        load_model_config("lama-3.1-70b", catalog=builtin)


# ---- user overrides ------------------------------------------------------------------------------------------


def test_user_dir_overrides_a_gpu_and_adds_one(tmp_path, builtin):
    h100 = builtin.gpu("h100-sxm").model_dump()
    new = dict(h100, id="h100-test", name="NVIDIA H100 test", aliases=["H100T"], memory_gb=96.0, source="test")
    d = _write_gpus(tmp_path / "cat", [dict(h100, memory_gb=96.0), new])
    cat = Catalog.load(d)
    assert cat.gpu("H100").memory_gb == 96.0 and cat.gpu("h100t").name == "NVIDIA H100 test"
    n = len(builtin.gpus)
    assert len(cat.gpus) == n + 1 and list(cat.gpus)[:n] == list(builtin.gpus)
    assert Catalog.load().gpu("H100").memory_gb == pytest.approx(80 * GIB_IN_GB, rel=1e-4)  # built-in untouched


def test_env_var_names_the_user_dir(tmp_path, monkeypatch, builtin):
    new = dict(builtin.gpu("l4").model_dump(), id="l4-test", name="L4 test", aliases=[])
    monkeypatch.setenv(ENV_VAR, str(_write_gpus(tmp_path / "env", [new])))
    assert get_gpu("l4 test").id == "l4-test"


def test_user_model_is_added(tmp_path):
    d = tmp_path / "cat"
    (d / "models").mkdir(parents=True)
    (d / "models" / "tiny.json").write_text('{"model_type": "llama", "hidden_size": 64}')
    (d / "models.yaml").write_text(
        "- {name: tiny, aliases: [my/tiny], family: llama, file: tiny.json, source: me, fidelity: verbatim,\n"
        "   published_params_source: not read}\n"
    )
    cfg, entry = load_model_config("MY/TINY", catalog=Catalog.load(d))
    assert cfg["hidden_size"] == 64 and entry.name == "tiny"


def test_malformed_user_gpus_yaml_names_file_and_field(tmp_path, builtin):
    bad = dict(builtin.gpu("h100-sxm").model_dump(), memory_gb="lots")
    d = _write_gpus(tmp_path / "cat", [bad])
    with pytest.raises(CatalogFileError, match=r"gpus\.yaml: h100-sxm\.memory_gb: Input should be a valid number"):
        Catalog.load(d)


def test_unknown_key_in_user_gpus_yaml_is_rejected(tmp_path, builtin):
    d = _write_gpus(tmp_path / "cat", [dict(builtin.gpu("t4").model_dump(), hbm_gb=16)])
    with pytest.raises(CatalogFileError, match=r"gpus\.yaml: t4\.hbm_gb: unknown key; allowed keys: id, aliases"):
        Catalog.load(d)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"intra_node_link": "infiniband"}, r"t4\.intra_node_link: Input should be 'nvlink'"),
        ({"dense_tflops": {"bf16": 1.0}}, r"t4\.dense_tflops: keys must be exactly fp32, tf32"),
        ({"aliases": ["H100"]}, r"t4\.aliases: 'H100' already names 'h100-sxm'"),
    ],
)
def test_invalid_user_gpu_fields_are_one_line_errors(tmp_path, builtin, change, message):
    d = _write_gpus(tmp_path / "cat", [dict(builtin.gpu("t4").model_dump(), **change)])
    with pytest.raises(CatalogFileError, match=message) as err:
        Catalog.load(d)
    assert "\n" not in str(err.value)


def test_malformed_user_files_are_errors(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "gpus.yaml").write_text("- id: [unclosed\n")
    with pytest.raises(CatalogFileError, match=r"gpus\.yaml: not valid YAML \(line"):
        Catalog.load(tmp_path / "a")
    d = _user_prices(tmp_path / "b", [("h100-sxm", "rent", 1, "", "", "usd_per_gpu_hour", "p", "", "2026")])
    with pytest.raises(CatalogFileError, match=r"prices\.csv: row 2\.kind: Input should be 'on-demand'"):
        Catalog.load(d)
    d = _user_prices(tmp_path / "c", [("h100-sxmm", "spot", 1, "", "", "usd_per_gpu_hour", "p", "", "2026")])
    with pytest.raises(CatalogFileError, match=r"prices\.csv: row 2\.gpu_id: unknown GPU 'h100-sxmm'"):
        Catalog.load(d)
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "prices.csv").write_text("gpu_id,kind,usd,price\n")
    with pytest.raises(CatalogFileError, match=r"prices\.csv: header: unknown column\(s\) \['price'\]"):
        Catalog.load(tmp_path / "e")
    with pytest.raises(CatalogFileError, match="catalog directory not found"):
        Catalog.load(tmp_path / "missing")


# ---- user prices: override by (GPU, kind, provider, region), the rest stay -----------------------------------


def _rows_of(cat: Catalog, gpu: str, kind: str) -> list[tuple[str, float | None]]:
    return [(r.provider, r.usd) for r in cat.prices if r.gpu_id == gpu and r.kind == kind]


def test_a_user_price_row_overrides_its_provider_and_region_and_keeps_the_other_providers(tmp_path, builtin):
    # built-in a100-80gb on-demand rows include two Hyperstack rows (no region) and "GCP Iowa" (a region)
    d = _user_prices(tmp_path / "c", [
        ("a100-80gb", "on-demand", 1.11, "", "", "usd_per_gpu_hour", "Hyperstack", "", "2026-11-01"),
        ("a100-80gb", "on-demand", 2.22, "", "", "usd_per_gpu_hour", "GCP europe-west4", "", "2026-11-01"),
        ("a100-80gb", "spot", 0.55, "", "", "usd_per_gpu_hour", "NewCloud", "", "2026-11-01"),
    ])  # fmt: skip
    cat = Catalog.load(d)
    before, after = _rows_of(builtin, "a100-80gb", "on-demand"), _rows_of(cat, "a100-80gb", "on-demand")
    assert [p for p in before if p[0] == "Hyperstack"] == [("Hyperstack", 1.35), ("Hyperstack", 1.6)]
    assert [p for p in after if p[0] == "Hyperstack"] == [("Hyperstack", 1.11)]  # both overridden
    # GCP in another region adds an offer: the Iowa row stays
    assert ("GCP Iowa", 5.06879789) in before and ("GCP Iowa", 5.06879789) in after
    assert ("GCP europe-west4", 2.22) in after
    # every other provider's built-in row stays, in order, and a new provider's spot row adds to the built-in spot
    assert [p for p in after if p[0] != "Hyperstack" and p != ("GCP europe-west4", 2.22)] == \
        [p for p in before if p[0] != "Hyperstack"]
    assert _rows_of(cat, "a100-80gb", "spot") == [*_rows_of(builtin, "a100-80gb", "spot"), ("NewCloud", 0.55)]
    assert _rows_of(cat, "h100-sxm", "on-demand") == _rows_of(builtin, "h100-sxm", "on-demand")  # other GPUs


def test_a_regionless_row_stands_for_every_region_of_its_provider(tmp_path, builtin):
    # built-in h100-sxm on-demand: "AWS us-east-1", "AWS EC2 P5" and "AWS (pre-cut)" (both no region)
    assert {p[0] for p in _rows_of(builtin, "h100-sxm", "on-demand") if p[0].startswith("AWS")} >= {
        "AWS us-east-1", "AWS EC2 P5", "AWS (pre-cut)"}
    east = Catalog.load(_user_prices(tmp_path / "e", [
        ("h100-sxm", "on-demand", 3.33, "", "", "usd_per_gpu_hour", "AWS us-east-1", "", "2026-11-01")]))
    west = Catalog.load(_user_prices(tmp_path / "w", [
        ("h100-sxm", "on-demand", 4.44, "", "", "usd_per_gpu_hour", "AWS us-west-2", "", "2026-11-01")]))
    anywhere = Catalog.load(_user_prices(tmp_path / "a", [
        ("h100-sxm", "on-demand", 5.55, "", "", "usd_per_gpu_hour", "AWS", "", "2026-11-01")]))
    aws = {name: [p for p in _rows_of(c, "h100-sxm", "on-demand") if p[0].startswith("AWS")]
           for name, c in (("east", east), ("west", west), ("anywhere", anywhere))}  # fmt: skip
    assert aws["east"] == [("AWS us-east-1", 3.33)]  # same region, and the rows naming none
    assert aws["west"] == [("AWS us-east-1", 6.88), ("AWS us-west-2", 4.44)]  # another region: us-east-1 stays
    assert aws["anywhere"] == [("AWS", 5.55)]


def test_with_no_user_row_every_builtin_row_stays_in_order(builtin):
    rows = list(builtin.prices)
    assert price_rows_merged(rows, []) == list(range(len(rows)))
    assert price_rows_merged(iter(rows), iter([])) == list(range(len(rows)))  # iterables, read once
    assert price_rows_merged(rows, [], mode="only") == []
    assert price_rows_merged([], rows) == []  # the first layer: nothing before it


def test_catalog_yaml_prices_only_drops_every_builtin_price(tmp_path, builtin):
    d = _user_prices(tmp_path / "c", [("l4", "spot", 0.2, "", "", "usd_per_gpu_hour", "p", "", "2026-01-02")])
    (d / "catalog.yaml").write_text("# my prices and no others\nprices: only\n")
    cat = Catalog.load(d)
    assert [(r.gpu_id, r.provider, r.usd) for r in cat.prices] == [("l4", "p", 0.2)]
    with pytest.raises(InputError, match=r"no on-demand price for GPU 'h100-sxm'; kinds with a price: none"):
        find_price("h100-sxm", "on-demand", catalog=cat)
    merge = _user_prices(tmp_path / "m", [("l4", "spot", 0.2, "", "", "usd_per_gpu_hour", "p", "", "2026-01-02")])
    (merge / "catalog.yaml").write_text("prices: merge\n")  # the default, spelled out
    assert Catalog.load(merge).prices == (*builtin.prices, cat.prices[0])


@pytest.mark.parametrize(("text", "pattern"), [
    ("prices: mine\n", r"catalog\.yaml: prices: 'mine' is not one of merge, only"),
    ("price: only\n", r"catalog\.yaml: price: unknown key; allowed keys: prices"),
    ("- only\n", r"catalog\.yaml: expected a mapping \(prices: merge \| only\), got list"),
])  # fmt: skip
def test_a_bad_catalog_yaml_is_one_line_naming_the_key(tmp_path, text, pattern):
    d = tmp_path / "c"
    d.mkdir()
    (d / "catalog.yaml").write_text(text)
    with pytest.raises(CatalogFileError, match=pattern):
        Catalog.load(d)


def test_a_starts_from_price_is_a_floor_never_chosen(builtin):
    # validation/reference/gpu_prices.csv: packet.ai's RTX PRO 6000 "starts from" $0.66 (vendor blog) and Akash's
    # "Starting at" rows are the only RTX PRO 6000 prices: a lower bound is no offer, so there is none to take
    floors = [r for r in _price_rows() if "starts from" in r["notes"] or "Starting at" in r["source"]]
    assert {r["provider_or_market"] for r in floors} == {"packet.ai", "Akash Network"} and len(floors) == 9
    for kind in ("on-demand", "marketplace"):
        with pytest.raises(InputError, match=rf"no {kind} price for GPU 'rtx-pro-6000'; kinds with a price: none"):
            find_price("rtx-pro-6000", kind, catalog=builtin)
    assert find_price("h200-sxm", "on-demand", catalog=builtin).provider != "packet.ai"
