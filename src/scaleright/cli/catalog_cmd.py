"""``scaleright catalog gpus|prices|models``: list what the estimator knows, with sources."""

from __future__ import annotations

from pathlib import Path

import typer

from scaleright.catalog.gpus import Accelerator
from scaleright.cli.common import CatalogOpt, JsonOpt, catalog_from, emit_json, table

catalog_app = typer.Typer(help="List the accelerator, price and model catalogs (built-in plus --catalog DIR).",
                          no_args_is_help=True)  # fmt: skip


def register(app: typer.Typer) -> None:
    app.add_typer(catalog_app, name="catalog")


@catalog_app.command("gpus")
def gpus_cmd(catalog: Path | None = CatalogOpt, as_json: bool = JsonOpt) -> None:
    """Accelerators: memory, bandwidth, dense TFLOP/s per precision, power, links."""
    cat = catalog_from(catalog)
    if as_json:
        emit_json([g.model_dump() for g in cat.gpus.values()])
        return
    rows = [
        [g.id, g.memory_gb, g.hbm_bandwidth_tb_per_s, _rate(g, "bf16"), _rate(g, "fp8"), g.tdp_w,
         f"{g.intra_node_link} {g.intra_node_gb_per_s_per_gpu:g}", g.gpus_per_node, ", ".join(g.unverified) or ""]
        for g in cat.gpus.values()
    ]  # fmt: skip
    table("Accelerators", ["id", "memory GB", "HBM TB/s", "bf16 TFLOP/s", "fp8 TFLOP/s", "TDP W",
                           "intra-node GB/s", "GPUs/node", "unverified"], rows,
          caption="Dense TFLOP/s; 'none, runs X' = no tensor rate for it, plans fall back to X; "
                  "sources: scaleright catalog gpus --json")  # fmt: skip


def _rate(gpu: Accelerator, precision: str) -> float | str:
    """The dense rate, or which precision a plan runs instead when the part has none (``tensor_precision``)."""
    ran, _ = gpu.tensor_precision(precision)
    rate = gpu.dense_tflops[precision]
    if ran == precision and rate is not None:
        return float(rate)
    return f"none, runs {ran}" if ran else "none"


@catalog_app.command("prices")
def prices_cmd(
    gpu: str | None = typer.Option(None, "--gpu", help="Only this GPU (id or alias)."),
    kind: str | None = typer.Option(None, "--kind", help="on-demand, spot, marketplace, reserved, reserved-1y, "
                                    "reserved-3y, committed, serverless (billed per second) or purchase."),
    catalog: Path | None = CatalogOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Dated prices per GPU-hour (rent) and per GPU (purchase), each with its source."""
    from scaleright.catalog import list_prices

    cat = catalog_from(catalog)
    rows = list_prices(gpu, kind, catalog=cat)
    if as_json:
        emit_json([r.model_dump() for r in rows])
        return
    table("Prices", ["gpu", "kind", "usd", "unit", "provider", "date", "source"],
          [[r.gpu_id, r.kind, r.price, r.unit, r.provider, r.date, r.source[:60]] for r in rows])  # fmt: skip


def model_summary(entry, spec) -> dict:
    from scaleright.workload import count_params

    c = count_params(spec)
    return {
        "name": entry.name, "family": spec.family, "params_total": c.total, "params_active": c.active,
        "layers": spec.layers, "hidden": spec.hidden, "heads": spec.heads, "kv_heads": spec.kv_heads,
        "vocab": spec.vocab, "ffn_hidden": spec.ffn_hidden, "experts": spec.moe.num_experts if spec.moe else 0,
        "published_params_total_b": entry.published_params_total_b, "source": entry.source,
    }  # fmt: skip


@catalog_app.command("models")
def models_cmd(catalog: Path | None = CatalogOpt, as_json: bool = JsonOpt) -> None:
    """Model architectures with exact parameter counts derived from their config.json."""
    from scaleright.workload import from_hf_config

    cat = catalog_from(catalog)
    out = [
        model_summary(e, from_hf_config(dict(cat.model_configs[e.name]), name=e.name, source=e.file))
        for e in cat.models.values()
    ]
    if as_json:
        emit_json(out)
        return
    table("Models", ["name", "family", "params (B)", "active (B)", "layers", "hidden", "heads", "kv heads", "vocab"],
          [[m["name"], m["family"], m["params_total"] / 1e9, m["params_active"] / 1e9, m["layers"], m["hidden"],
            m["heads"], m["kv_heads"], m["vocab"]] for m in out])  # fmt: skip
