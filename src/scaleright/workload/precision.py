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

GGUF (llama.cpp) file types store each tensor in a ggml block format (``ggml-common.h``), bytes per block / weights:
``block_q8_0`` fp16 scale + 32 int8 = 34 / 32 (8.5 bits per weight); ``block_q4_0`` fp16 scale + 16 B = 18 / 32
(4.5); ``block_q5_0`` fp16 scale + 4 B high bits + 16 B = 22 / 32 (5.5); ``block_q5_1`` two fp16 + 4 + 16 = 24 / 32
(6.0); ``block_q4_K`` two fp16 (d, dmin) + 12 B scales + 128 B = 144 / 256 (4.5); ``block_q5_K`` 4 + 12 + 32 (qh) +
128 = 176 / 256 (5.5); ``block_q6_K`` 128 (ql) + 64 (qh) + 16 (scales) + 2 (d) = 210 / 256 (6.5625). A file type
(``q8_0``, ``q6_k``, ``q5_k_m``, ``q4_k_m``, ``q4_0``, llama-quantize's names) mixes them per tensor (llama.cpp's
``llama_tensor_get_type``): ``BYTES_PER_ELEMENT`` holds its base type's bytes per weight, the file's real bytes are
``workload.params.gguf_weight_bytes`` from the model's own tensors. GGUF formats are weight-only (activations stay
16-bit); llama.cpp runs them natively, vLLM and SGLang through experimental GGUF loaders (vLLM's documentation
calls its support highly experimental), TensorRT-LLM loads no GGUF file (``check_gguf_engine``).
"""

from __future__ import annotations

from scaleright.errors import InputError

__all__ = ["BYTES_PER_ELEMENT", "bytes_per_element", "COMPUTE_PRECISIONS", "STORAGE_PRECISIONS", "TRAIN_PRECISIONS",
           "KV_PRECISIONS", "GGML_BLOCKS", "GGUF_BASE_TYPE", "GGUF_PRECISIONS", "NO_GGUF_ENGINES", "check_gguf_engine",
           "ggml_bytes_per_weight", "is_gguf"]

# ggml block formats: (bytes per block, weights per block), the block structs of ggml-common.h
GGML_BLOCKS: dict[str, tuple[int, int]] = {
    "q4_0": (2 + 16, 32), "q5_0": (2 + 4 + 16, 32), "q5_1": (2 + 2 + 4 + 16, 32), "q8_0": (2 + 32, 32),
    "q4_k": (2 + 2 + 12 + 128, 256), "q5_k": (2 + 2 + 12 + 32 + 128, 256), "q6_k": (128 + 64 + 16 + 2, 256),
    "f16": (2, 1), "f32": (4, 1),
}
# GGUF file types (llama-quantize's names, lower case) and the ggml type of most of their matrices
GGUF_BASE_TYPE: dict[str, str] = {"q8_0": "q8_0", "q6_k": "q6_k", "q5_k_m": "q5_k", "q4_k_m": "q4_k", "q4_0": "q4_0"}
GGUF_PRECISIONS = tuple(GGUF_BASE_TYPE)
NO_GGUF_ENGINES = ("trtllm",)  # engine profiles whose engine loads no GGUF file


def ggml_bytes_per_weight(ggml_type: str) -> float:
    """Bytes per weight of a ggml block format (``GGML_BLOCKS``)."""
    nbytes, weights = GGML_BLOCKS[ggml_type]
    return nbytes / weights


def is_gguf(precision: str) -> bool:
    """Whether ``precision`` names a GGUF file type (``GGUF_PRECISIONS``)."""
    return precision in GGUF_BASE_TYPE


def check_gguf_engine(precision: str, engine: str, *, field: str = "precision") -> None:
    """One line (``InputError``) when a GGUF ``precision`` meets an engine that loads no GGUF file."""
    if is_gguf(precision) and engine in NO_GGUF_ENGINES:
        raise InputError(f"{field}={precision!r} is a GGUF file type and engine {engine!r} loads no GGUF file; "
                         "llama.cpp runs GGUF (vLLM and SGLang through experimental GGUF loaders)")

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
    **{name: ggml_bytes_per_weight(base) for name, base in GGUF_BASE_TYPE.items()},  # the base type (docstring)
}

STORAGE_PRECISIONS = ("fp32", "bf16", "fp16", "fp8", "int8", "int4", "fp4", *GGUF_PRECISIONS)
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
