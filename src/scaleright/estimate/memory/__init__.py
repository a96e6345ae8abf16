"""Memory per GPU, broken down by component, for training, fine-tuning (LoRA / QLoRA) and inference.

One module per concept:

- ``states``: model states, weights / gradients / optimizer per GPU under ZeRO / FSDP sharding (Rajbhandari et
  al. 2020);
- ``activations``: what each layer keeps for the backward pass (Korthikanti et al. 2022) and the pipeline's
  in-flight micro-batches;
- ``adapters``: LoRA / QLoRA adapters;
- ``inference``: weights at storage precision, the KV cache, one step's workspace;
- ``overheads``: the CUDA context, library workspaces, communicator buffers and the caching allocator's reserve;
- ``profiles``: what each training framework keeps (state format, loss, attention, CUDA stack);
- ``training``: the training footprint assembled from the above; ``breakdown``: the result type.

Every function accepts numpy arrays for the layout axes and broadcasts, so the planner evaluates many layouts in
one call; the scalar API (``training_memory``, ``inference_memory``) is a view of the same arrays.

Each module loads on the first use of one of its names (``scaleright._lazy``): an inference estimate imports none
of the training modules, a training estimate not the inference one.
"""

from typing import TYPE_CHECKING

from scaleright._lazy import lazy_exports

if TYPE_CHECKING:  # what ``__getattr__`` gives, for type checkers
    from scaleright.estimate.memory.activations import (
        CROSS_ENTROPY,
        _recompute_code,
        activation_bytes_per_layer,
        cross_entropy_bytes,
        op_selective_recompute_fraction,
    )
    from scaleright.estimate.memory.adapters import LORA_TARGETS, LoraConfig, lora_param_count
    from scaleright.estimate.memory.breakdown import GB, MemoryBreakdown
    from scaleright.estimate.memory.inference import inference_memory, inference_memory_arrays, kv_cache_bytes
    from scaleright.estimate.memory.overheads import Overheads, allocator_reserve_bytes, nccl_buffer_bytes
    from scaleright.estimate.memory.profiles import MemoryProfile, memory_profile, resolve_profile
    from scaleright.estimate.memory.states import (
        OPTIMIZERS,
        STATE_FORMATS,
        StateFormat,
        gathered_buffer_bytes,
        model_state_bytes,
        optimizer_bytes_per_param,
    )
    from scaleright.estimate.memory.training import TASKS, training_memory, training_memory_arrays

__all__ = [
    "GB",
    "TASKS",
    "OPTIMIZERS",
    "LORA_TARGETS",
    "LoraConfig",
    "Overheads",
    "MemoryProfile",
    "memory_profile",
    "resolve_profile",
    "MemoryBreakdown",
    "optimizer_bytes_per_param",
    "model_state_bytes",
    "activation_bytes_per_layer",
    "training_memory_arrays",
    "training_memory",
    "kv_cache_bytes",
    "inference_memory_arrays",
    "inference_memory",
    "lora_param_count",
    "CROSS_ENTROPY",
    "STATE_FORMATS",
    "StateFormat",
    "allocator_reserve_bytes",
    "cross_entropy_bytes",
    "gathered_buffer_bytes",
    "nccl_buffer_bytes",
    "op_selective_recompute_fraction",
    "_recompute_code",
]

_MODULE_OF, __getattr__, __dir__ = lazy_exports(__name__, {
    "activations": ("CROSS_ENTROPY", "_recompute_code", "activation_bytes_per_layer", "cross_entropy_bytes",
                    "op_selective_recompute_fraction"),
    "adapters": ("LORA_TARGETS", "LoraConfig", "lora_param_count"),
    "breakdown": ("GB", "MemoryBreakdown"),
    "inference": ("inference_memory", "inference_memory_arrays", "kv_cache_bytes"),
    "overheads": ("Overheads", "allocator_reserve_bytes", "nccl_buffer_bytes"),
    "profiles": ("MemoryProfile", "memory_profile", "resolve_profile"),
    "states": ("OPTIMIZERS", "STATE_FORMATS", "StateFormat", "gathered_buffer_bytes", "model_state_bytes",
               "optimizer_bytes_per_param"),
    "training": ("TASKS", "training_memory", "training_memory_arrays"),
})  # fmt: skip
