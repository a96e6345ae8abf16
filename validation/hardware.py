"""The GPUs the reference rows name, as catalog accelerators and clusters (or a reason they are not in the catalog).

Each row's ``gpu`` string maps to a catalog id, with a note where the measured part is not quite the catalog part
(power caps, a smaller usable memory); the cluster is the catalog's typical node, except where the row's machine is
documented otherwise (Jean Zay's inter-node bandwidth for BLOOM).
"""

from __future__ import annotations

from scaleright.catalog import get_gpu
from scaleright.catalog.gpus import Accelerator
from scaleright.estimate.comm import Cluster
from validation.files import SkipRow

__all__ = ["CLUSTER_OVERRIDES", "GPU_MAP", "map_gpu"]


# csv gpu string -> (catalog name, note or "") ; None: not in the catalog (the row is skipped with that reason)
GPU_MAP: dict[str, tuple[str, str] | None] = {
    "A100": ("a100-80gb", "Megatron-LM 2021 runs on Selene (A100 80GB SXM, Narayanan et al. 2021)"),
    "A100-80GB": ("a100-80gb", ""),
    "A100-40GB": ("a100-40gb", ""),
    "A100-SXM-80GB (Jean Zay)": ("a100-80gb", ""),
    "A100-SXM4-80GB": ("a100-80gb", ""),
    "H100": ("h100-sxm", ""),
    "H100-80GB": ("h100-sxm", ""),
    "H100 (DGX H100)": ("h100-sxm", ""),
    "H100 (DGX-H100)": ("h100-sxm", ""),
    "DGX-H100": ("h100-sxm", ""),
    "H100 80GB HBM3": ("h100-sxm", ""),
    "H100 SXM 80GB (DGX H100)": ("h100-sxm", ""),
    "H100 SXM 96GB HBM2e @500W (Grand Teton)": (
        "h100-sxm",
        "H100 96GB HBM2e capped at 500 W (not the 700 W SXM part): modelled as h100-sxm, so a 500 W clock deficit "
        "shows up as over-prediction",
    ),
    "H200 (8/node, 400Gb/s CX-7 per GPU)": ("h200-sxm", ""),
    "H200 141GB HBM3": ("h200-sxm", ""),
    "H200 SXM 141GB (DGX H200)": ("h200-sxm", ""),
    "H200 131GB HBM3": ("h200-sxm", "listed as 'H200 131GB' (usable memory of the run); modelled as h200-sxm"),
    "B200 (power limited), single node": (
        "b200", "power-limited B200: modelled as the datasheet b200, so the power cap shows up as over-prediction"
    ),
    "DGX-B200": ("b200", ""),
    "B200 180GB (DGX B200)": ("b200", ""),
    "DGX-GB200": ("gb200", ""),
    "GB200 192GB (GB200 NVL72)": ("gb200", ""),
    "L40S": ("l40s", ""),
    "DGX-GB300": (
        "gb300",
        "DGX GB300 = GB300 NVL72 (72 Blackwell Ultra GPUs in one NVLink domain): modelled as the catalog's per-GPU "
        "gb300 (rack datasheet / 72)",
    ),
    "GH200 480GB": (
        "gh200",
        "GH200 480GB = the 96 GB HBM3 GPU with 480 GB LPDDR5X (the 144 GB HBM3e variant is sold as 'GH200 624GB'): "
        "modelled as the catalog gh200 (96 GB, 4.0 TB/s), one superchip per node; the run's power setting is not "
        "stated (the module is configurable 450-1000 W)",
    ),
    "RTX PRO 6000 Blackwell Server Edition": (
        "rtx-pro-6000",
        "RTX PRO 6000 Blackwell Server Edition: modelled as the catalog rtx-pro-6000 (96 GB GDDR7, 1.79 TB/s, "
        "PCIe 5.0 with peer-to-peer, no NVLink: assumed, as in the catalog's notes)",
    ),
}

# Jean Zay's A100 partition (BLOOM): 8 GPUs per node and 4 x 100 Gb/s Omni-Path per node (BLOOM paper,
# arXiv:2211.05100, "Hardware"; IDRIS Jean Zay gpu_p5 description): 50 Gb/s per GPU, not the catalog's typical 200.
CLUSTER_OVERRIDES = {"A100-SXM-80GB (Jean Zay)": {"inter_node_gbps_per_gpu": 50.0}}


def map_gpu(gpu_str: str) -> tuple[Accelerator, Cluster, tuple[str, ...]]:
    key = gpu_str.strip()
    if key not in GPU_MAP:
        raise SkipRow(f"GPU not mapped: {key!r}")
    entry = GPU_MAP[key]
    if entry is None:
        raise SkipRow(f"GPU not in catalog: {key.split(' (')[0].replace('DGX-', '')}")
    name, note = entry
    gpu = get_gpu(name)
    cluster = Cluster.for_gpu(gpu, **CLUSTER_OVERRIDES.get(key, {}))
    notes = (note,) if note else ()
    if key in CLUSTER_OVERRIDES:
        notes += ("inter-node 50 Gb/s per GPU (Jean Zay: 4 x 100 Gb/s Omni-Path per 8-GPU node)",)
    return gpu, cluster, notes
