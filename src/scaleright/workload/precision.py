"""Bytes per element of each numeric format, with the storage overhead of block-scaled formats.

Plain formats: fp32/tf32 4 B (tf32 is a compute mode stored as fp32), bf16/fp16 2 B, fp8/int8 1 B.
Block-scaled formats carry one scale per block, which we add to the per-element cost:
- ``int4``: group-wise weight-only quantisation (GPTQ/AWQ style) with groups of 128 and an fp16 scale and zero
  point per group: 0.5 B + 4 B / 128 = 0.53125 B (Frantar et al. 2022; Lin et al. 2023, group size 128).
- ``fp4``: NVFP4, blocks of 16 elements with one FP8 (E4M3) scale: 0.5 B + 1 B / 16 = 0.5625 B (NVIDIA Blackwell
  NVFP4 format description).
- ``mxfp4``: OCP Microscaling MXFP4 (OCP MX specification v1.0): blocks of 32 FP4 (E2M1) elements with one 8-bit
  E8M0 scale: 0.5 B + 1 B / 32 = 0.53125 B; how gpt-oss ships its experts (``quantization_config``).
- ``nf4``: QLoRA's 4-bit NormalFloat with double quantisation, 4.127 bits per parameter (Dettmers et al. 2023,
  section 3: block 64, 8-bit constants with a second-level block of 256: 32/(64*256) + 8/64 = 0.127 bits).
- ``fp8``: per-tensor or per-row scales, negligible per element (0 here).
"""

from __future__ import annotations

from scaleright.errors import InputError

__all__ = ["BYTES_PER_ELEMENT", "bytes_per_element", "COMPUTE_PRECISIONS", "STORAGE_PRECISIONS", "TRAIN_PRECISIONS",
           "KV_PRECISIONS"]

BYTES_PER_ELEMENT: dict[str, float] = {
    "fp32": 4.0,
    "tf32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5 + 4.0 / 128,
    "fp4": 0.5 + 1.0 / 16,
    "mxfp4": 0.5 + 1.0 / 32,
    "nf4": 4.127 / 8,
}

STORAGE_PRECISIONS = ("fp32", "bf16", "fp16", "fp8", "int8", "int4", "fp4")
TRAIN_PRECISIONS = ("fp32", "bf16", "fp16", "fp8", "fp4")  # formats a training step's GEMMs run in
KV_PRECISIONS = ("fp32", "bf16", "fp16", "fp8", "int8")  # KV-cache formats serving engines offer
COMPUTE_PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4")


def bytes_per_element(precision: str, *, field: str = "precision") -> float:
    """Storage bytes per element of ``precision`` including block-scale overhead."""
    try:
        return BYTES_PER_ELEMENT[precision.lower()]
    except KeyError:
        raise InputError(
            f"{field}={precision!r} is not a known precision; allowed: {', '.join(BYTES_PER_ELEMENT)}"
        ) from None
