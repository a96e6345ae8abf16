"""An accelerator as the estimator sees it: memory, bandwidth, peak dense rates, its node and network.

Facts come from ``validation/reference/gpu_specs.csv`` (each entry keeps that row's ``source``): vendor datasheets
and whitepapers, Google Cloud TPU and AWS Neuron docs, stas00/ml-engineering tables, MLPerf system JSONs. Where a
datasheet corrects the csv (RTX 3090's FP32-accumulate bf16, the NVL parts' own peaks) or a part has no csv row
(H800, H20, GH200, GB300, RTX PRO 6000, L40, RTX A6000), the datasheet is appended to ``source`` and ``notes`` say
so; a figure computed rather than read (per-GPU shares of a rack, rates from a sparse headline) says ``derived``
with its derivation. ``tensor_precision`` names the precision a part runs when it lacks the requested one. SI units
throughout (1 GB = 1e9 B, 1 TB/s = 1e12 B/s); the unit is in every field name. Rates are dense (no structured
sparsity): NVIDIA and AMD datasheets print sparse figures, which the csv halves. What the catalog adds (node size,
intra-node bandwidth in one direction, NIC per GPU) is a typical value whose reason is in ``notes``; assumed or
source-flagged fields are named in ``unverified``.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from scaleright.limits import bounds

__all__ = ["Accelerator", "PRECISIONS", "LINKS", "PRECISION_FALLBACK", "normalize_name"]

PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4")
# The formats a requested tensor precision runs in on a part without a rate for it, nearest first: a narrower
# format falls back to a wider one the part has (fp8 on an A100 trains in bf16), bf16 and fp16 to each other (Volta
# and Turing have fp16 tensor cores only; TPUs bf16 only). fp32 and tf32 have no fallback (TPUs: no fp32 rate).
PRECISION_FALLBACK: dict[str, tuple[str, ...]] = {
    "fp4": ("fp8", "bf16", "fp16"), "fp8": ("bf16", "fp16"), "int8": ("fp8", "bf16", "fp16"),
    "bf16": ("fp16",), "fp16": ("bf16",), "tf32": (), "fp32": (),
}  # fmt: skip
LINKS = ("nvlink", "pcie", "infinity-fabric", "ici", "neuronlink", "roce")

_SEPARATORS = re.compile(r"[\s_\-]+")

# Upper bounds (scaleright.limits, each with its reason) keep a user's gpus.yaml finite in the planner's arithmetic.
_MemoryGB = Annotated[float, *bounds("memory_gb")]
_TBps = Annotated[float, *bounds("tb_per_s")]
_TFlops = Annotated[float, *bounds("tflops")]
_Watts = Annotated[float, *bounds("watts")]
_GBps = Annotated[float, *bounds("gb_per_s")]
_Gbps = Annotated[float, *bounds("gbps")]
_NodeGpus = Annotated[int, *bounds("chips_per_domain")]


def normalize_name(name: str) -> str:
    """Lookup key of a catalog name: case-insensitive, spaces, underscores and hyphens treated alike."""
    return _SEPARATORS.sub("-", name.strip().lower()).strip("-")



# PCIe x16 bandwidth per direction by generation, GB/s (PCI-SIG: 8, 16, 32, 64 GT/s with 128b/130b encoding; 6.0
# with FLIT/PAM4 ~121 GB/s usable): the rate of an accelerator's host link (``pcie_gen``), read by KV swap
# (``estimate.iteration``) and offload (``estimate.memory.offload``).
PCIE_X16_GB_PER_S = {"3.0": 15.75, "4.0": 31.5, "5.0": 63.0, "6.0": 121.0}

class Accelerator(BaseModel):
    """One accelerator part and its typical node. Unknown keys are an error."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False, defer_build=True)  # .inf, nan: errors

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9.\-]*$")  # canonical id, e.g. "h100-sxm"
    aliases: list[str] = []  # other names that resolve to this part (matched by ``normalize_name``)
    name: str  # vendor's name as in the source table
    vendor: str
    architecture: str
    memory_gb: _MemoryGB = Field(gt=0)  # device memory, 1e9 bytes
    memory_type: str  # e.g. "HBM3"; "(32 GiB)" where the source states GiB (memory_gb is then converted)
    hbm_bandwidth_tb_per_s: _TBps = Field(gt=0)  # device-memory bandwidth, 1e12 B/s
    dense_tflops: dict[str, _TFlops | None]  # dense peak per precision (int8 in TOPS); None: lacking or a source gap
    # dense FP16 tensor rate with FP16 accumulate where the datasheet prints one above ``dense_tflops.fp16`` (which
    # is the FP32-accumulate rate): GeForce RTX 30 / 40 / 50 run FP16 MMA with an FP32 accumulator at half the
    # FP16-accumulate rate (GA102, Ada and RTX Blackwell whitepapers, Appendix A). None: the part has no faster
    # FP16-accumulate rate (data-center and professional NVIDIA parts run either accumulator at the fp16 rate; bf16
    # MMA accumulates in FP32 only). Read through ``fp16_tflops(accumulate)``
    fp16_accumulate_tflops: _TFlops | None = Field(default=None, gt=0)
    tdp_w: _Watts | None = Field(default=None, gt=0)  # board power (W); None where none is published
    intra_node_link: Literal["nvlink", "pcie", "infinity-fabric", "ici", "neuronlink", "roce"]
    intra_node_link_generation: str | None = None  # e.g. "NVLink 4"
    intra_node_gb_per_s_per_gpu: _GBps = Field(gt=0)  # one direction, per GPU, inside a node (GB/s)
    pcie_gen: str | None = None  # host link, e.g. "5.0"
    # GPUs sharing the intra-node link in the vendor's standard system (see notes)
    gpus_per_node: _NodeGpus = Field(ge=1)
    nic_gbps_per_gpu: _Gbps = Field(gt=0)  # typical inter-node NIC bandwidth per GPU (Gb/s, as NICs are sold)
    launch_year: int | None = Field(default=None, ge=1970, le=2100, strict=True)  # a calendar year; not a boolean
    form_factor: str
    unverified: list[str] = []  # fields assumed here or marked unverified by the sources
    source: str  # where the facts were read
    notes: str = ""  # caveats, derivations and the reasons for added values

    @field_validator("dense_tflops")
    @classmethod
    def _all_precisions(cls, v: dict[str, float | None]) -> dict[str, float | None]:
        if set(v) != set(PRECISIONS):
            raise ValueError(f"keys must be exactly {', '.join(PRECISIONS)} (got {', '.join(v)})")
        if any(x is not None and x <= 0 for x in v.values()):
            raise ValueError("rates must be positive or null")
        return v

    @field_validator("unverified")
    @classmethod
    def _known_fields(cls, v: list[str]) -> list[str]:
        known = set(cls.model_fields) | {f"dense_tflops.{p}" for p in PRECISIONS}
        bad = [f for f in v if f not in known]
        if bad:
            raise ValueError(f"unknown field name(s) {bad}; allowed: field names or dense_tflops.<precision>")
        return v

    @model_validator(mode="after")
    def _accumulate_rate(self) -> Accelerator:
        fp16 = self.dense_tflops.get("fp16")
        if self.fp16_accumulate_tflops is not None and (fp16 is None or self.fp16_accumulate_tflops < fp16):
            raise ValueError(f"fp16_accumulate_tflops={self.fp16_accumulate_tflops:g} needs a dense_tflops.fp16 "
                             f"rate ({fp16}) and must be at least it: it is the FP16-accumulate rate where the "
                             "datasheet gives one above the FP32-accumulate fp16 figure")  # fmt: skip
        return self

    def fp16_tflops(self, accumulate: str) -> float | None:
        """Dense FP16 tensor TFLOP/s with an ``accumulate`` ("fp32" or "fp16") accumulator: the datasheet's
        FP16-accumulate rate where it gives one (``fp16_accumulate_tflops``), else ``dense_tflops.fp16`` for both."""
        if accumulate not in ("fp32", "fp16"):
            raise ValueError(f"accumulate={accumulate!r} not allowed; allowed: fp32, fp16")
        if accumulate == "fp16" and self.fp16_accumulate_tflops is not None:
            return self.fp16_accumulate_tflops
        return self.dense_tflops.get("fp16")

    def names(self) -> list[str]:
        """Every name this part answers to: id, vendor name and aliases."""
        return [self.id, self.name, *self.aliases]

    def tensor_precision(self, precision: str) -> tuple[str | None, str | None]:
        """``(precision it runs in, note)`` for a requested tensor ``precision``: the request itself when this part
        has a dense rate for it (note None); else the first of ``PRECISION_FALLBACK`` it has, with a one-line note
        saying so; ``(None, note)`` when it has none of them. fp32 counts as available where tf32 is (fp32
        training runs its GEMMs in tf32)."""
        rates = self.dense_tflops
        if rates.get(precision) or (precision == "fp32" and rates.get("tf32")):
            return precision, None
        for alt in PRECISION_FALLBACK.get(precision, ()):
            if rates.get(alt):
                return alt, f"{self.id} has no {precision} tensor rate: runs in {alt} instead"
        have = [p for p in PRECISIONS if rates.get(p)]
        return None, f"{self.id} has no {precision} tensor rate and no fallback; it has {', '.join(have) or 'none'}"
