"""A parallel layout: how one training or inference job is split over GPUs. Knows nothing of prices.

Dimensions follow Megatron-LM / torchtitan naming (torchtitan ``distributed/parallel_dims.py``):
``gpus = tp · pp · dp · cp``. MoE layers are laid out separately (Megatron-Core "MoE Parallel Folding", Liu et
al. 2025, arXiv:2504.14960): inside one pipeline stage the ``tp · cp · dp`` GPUs that run attention are regrouped
for the experts as ``etp · ep · edp`` — expert tensor parallel ``etp`` (innermost, default ``tp``), expert parallel
``ep`` (ranks ``etp`` apart), expert data parallel ``edp = tp·cp·dp / (ep·etp)``. So ``ep · etp`` must divide
``tp · cp · dp``, and an expert-parallel group may span data-, context- and tensor-parallel ranks (TP2 × EP32 on
256 GPUs is valid). With ``etp = tp`` this is the classic rule, ``ep`` divides ``dp · cp``.

ZeRO-3 shards over all ``dp · cp`` ranks (FSDP) or, with ``dp_shard`` smaller, over ``dp_shard`` of them and
replicates across the rest (HSDP: PyTorch FSDP2's hybrid sharding, torchtitan's ``data_parallel_shard_degree`` /
``data_parallel_replicate_degree``; the planner shards inside a host and replicates across hosts).

Offload (``estimate.memory.offload``): ``offload_optimizer`` keeps the optimizer states, fp32 master weights and
gradients in host memory and runs the optimizer step on the CPU (ZeRO-Offload, Ren et al. 2021; needs ZeRO >= 1);
``offload_activations`` copies the saved activations to host memory between forward and backward.

``pipeline_split_embedding_loss``: Megatron-Core's ``account_for_embedding_in_pipeline_split`` and
``account_for_loss_in_pipeline_split`` (TransformerConfig, both on; Megatron-Core's default is off): the pipeline
split counts the embedding and the loss/output head as one layer slot each, so ``L + 2`` slots are split over
``pp · virtual_stages`` model chunks and the first chunk of stage 0 holds one transformer layer fewer (the
embedding instead), the last chunk of the last stage one fewer (the head and loss). Megatron-Core then needs
``(L + 2) % pp == 0`` (and ``% (pp · v)`` when interleaved); here the split is ``ceil((L + 2) / (pp · v))`` slots a
chunk and the check is ``pp · v <= L + 2``. The planner does not search it (``LayoutArrays`` has no such field: every
planned layout has it off); ``estimate_train`` / ``training_memory`` read it from the ``Layout``.

``LayoutArrays`` is the same layout as a struct of numpy arrays (the planner's search evaluates millions at once);
``layout_text`` writes any layout as text, one way for every output.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

import numpy as np

from scaleright.errors import LayoutError
from scaleright.workload.spec import TransformerSpec

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray

__all__ = ["Layout", "LayoutArrays", "RECOMPUTE", "ZERO_STAGES", "divisors", "stage_layers", "stage_slots",
           "layout_text"]

# "op-selective": torchtitan's per-op selective activation checkpointing (estimate.memory.activations)
RECOMPUTE = ("none", "selective", "full", "op-selective")
ZERO_STAGES = (0, 1, 2, 3)


def divisors(n: int) -> list[int]:
    """All positive divisors of ``n`` in ascending order."""
    return [d for d in range(1, n + 1) if n % d == 0]


def stage_slots(layers: int, pp: ArrayLike, embedding_loss: ArrayLike = False) -> NDArray[np.float64]:
    """Layer slots of the fullest pipeline stage: ``ceil(L / pp)``; with the embedding and the loss counted as one slot
    each (``pipeline_split_embedding_loss``, pp > 1), ``ceil((L + 2) / pp)``, of which the first and the last stage
    give one to the embedding / the loss (module docstring)."""
    pp = np.asarray(pp, dtype=float)
    off = np.ceil(layers / pp)
    on = np.asarray(embedding_loss, dtype=bool) & (pp > 1)
    if not np.any(on):
        return off
    return np.where(on, np.ceil((layers + 2) / pp), off)[()]


def stage_layers(layers: int, pp: ArrayLike, embedding_loss: ArrayLike = False
                 ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:  # fmt: skip
    """(the most transformer layers a pipeline stage holds, those of the last stage). Off: ``ceil(L / pp)`` both.
    With the embedding and the loss counted as slots (Megatron-Core ``account_for_embedding_in_pipeline_split``,
    ``account_for_loss_in_pipeline_split``; pp > 1): ``n = ceil((L + 2) / pp)`` slots a stage, the first and the last
    stage ``n - 1`` layers, the middle ones ``n`` (pp = 2: both ends, ``n - 1``)."""
    pp = np.asarray(pp, dtype=float)
    on = np.asarray(embedding_loss, dtype=bool) & (pp > 1)
    off, slots = stage_slots(layers, pp), stage_slots(layers, pp, on)
    busiest = np.where(on, np.where(pp > 2, slots, slots - 1), off)
    return busiest, np.where(on, slots - 1, off)


@dataclass(frozen=True)
class Layout:
    """One parallel layout. Every field is per job; defaults mean "not used"."""

    tp: int = 1  # tensor-parallel size (splits heads and FFN columns; Shoeybi et al. 2019)
    pp: int = 1  # pipeline stages (Narayanan et al. 2021)
    dp: int = 1  # data-parallel replicas
    cp: int = 1  # context parallel: the sequence split over GPUs (ring attention)
    ep: int = 1  # expert parallel: routed experts split over this many GPUs of the tp·cp·dp group (folding)
    etp: int | None = None  # expert tensor parallel: each expert's FFN split over this many GPUs (None: tp)
    zero: int = 0  # ZeRO stage over the dp·cp group: 0 none, 1 optimizer, 2 +gradients, 3 +weights (= FSDP)
    dp_shard: int | None = None  # ZeRO-3 shard group (< dp·cp: HSDP, replicated dp·cp/dp_shard times); None: dp·cp
    micro_batch: int = 1  # sequences per micro-batch per data-parallel replica
    global_batch: int | None = None  # sequences per optimizer step (None: micro_batch · dp, no accumulation)
    recompute: str = "none"  # none, selective (attention core), full (each layer), op-selective (torchtitan per-op)
    sequence_parallel: bool = False  # Megatron sequence parallelism: norms/dropout split over tp
    virtual_stages: int = 1  # interleaved pipeline: model chunks per pipeline stage
    offload_optimizer: bool = False  # ZeRO-Offload: optimizer states and step on the CPU (needs zero >= 1)
    offload_activations: bool = False  # saved activations in host memory between forward and backward
    # Megatron-Core account_for_embedding/loss_in_pipeline_split: embedding and loss count as pipeline layer slots
    pipeline_split_embedding_loss: bool = False

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp * self.cp

    @property
    def expert_tp(self) -> int:
        """The expert-tensor-parallel size in use (``etp``, or ``tp`` when not given, as in Megatron-Core)."""
        return self.tp if self.etp is None else self.etp

    @property
    def edp(self) -> int:
        """Expert data parallel: replicas of each expert shard, ``tp·cp·dp / (ep·etp)``."""
        return max(self.tp * self.cp * self.dp // (self.ep * self.expert_tp), 1)

    @property
    def zero_shard(self) -> int:
        """Ranks the ZeRO states are sharded over: ``dp_shard`` (HSDP), else the whole ``dp · cp`` group."""
        return self.dp * self.cp if self.dp_shard is None else self.dp_shard

    @property
    def grad_accum(self) -> int:
        """Micro-batches per replica per optimizer step."""
        gb = self.global_batch or self.micro_batch * self.dp
        return max(gb // (self.micro_batch * self.dp), 1)

    def replace(self, **changes: Any) -> Layout:
        return dataclasses.replace(self, **changes)

    def kwargs(self) -> dict[str, Any]:
        """The layout keywords of ``train_step_arrays`` / ``training_memory_arrays`` (``LayoutArrays``' fields:
        ``etp`` and ``dp_shard`` as the sizes in use, ``recompute`` by name), for one layout."""
        d = {k: getattr(self, k) for k in _ARRAY_FIELDS}
        d["etp"], d["dp_shard"] = self.expert_tp, self.zero_shard
        d["pipeline_split_embedding_loss"] = self.pipeline_split_embedding_loss  # (not a planner array)
        return d

    def validate(self, spec: TransformerSpec | None = None, *, gpus: int | None = None) -> Layout:
        """Raise ``LayoutError`` naming the operands when this layout cannot exist; return self otherwise."""
        for name in ("tp", "pp", "dp", "cp", "ep", "etp", "dp_shard", "micro_batch", "virtual_stages"):
            v = getattr(self, name)
            if name in ("etp", "dp_shard") and v is None:
                continue
            if not isinstance(v, int) or v < 1:
                raise LayoutError(f"{name}={v!r} must be a positive integer")
        if self.zero not in ZERO_STAGES:
            raise LayoutError(f"zero={self.zero!r} must be one of {', '.join(map(str, ZERO_STAGES))}")
        for name in ("offload_optimizer", "offload_activations", "pipeline_split_embedding_loss"):
            if not isinstance(getattr(self, name), bool):
                raise LayoutError(f"{name}={getattr(self, name)!r} must be true or false")
        if self.offload_optimizer and self.zero == 0:
            raise LayoutError("offload_optimizer needs zero >= 1 (ZeRO-Offload partitions the optimizer states over "
                              "the data-parallel ranks); got zero(0)")  # fmt: skip
        if self.recompute not in RECOMPUTE:
            raise LayoutError(f"recompute={self.recompute!r} must be one of {', '.join(RECOMPUTE)}")
        if gpus is not None and self.gpus != gpus:
            raise LayoutError(
                f"tp({self.tp}) * pp({self.pp}) * dp({self.dp}) * cp({self.cp}) = {self.gpus} != gpus({gpus})"
            )
        attn = self.tp * self.cp * self.dp
        if attn % (self.ep * self.expert_tp):
            etp = f"etp({self.etp})" if self.etp is not None else f"etp(= tp, {self.tp})"
            raise LayoutError(
                f"ep({self.ep}) * {etp} = {self.ep * self.expert_tp} does not divide tp({self.tp}) * cp({self.cp}) * "
                f"dp({self.dp}) = {attn} (MoE parallel folding regroups a stage's tp·cp·dp GPUs as etp·ep·edp)"
            )
        if self.dp_shard is not None:
            if (self.dp * self.cp) % self.dp_shard:
                raise LayoutError(f"dp_shard({self.dp_shard}) does not divide dp({self.dp}) * cp({self.cp}) = "
                                  f"{self.dp * self.cp}")  # fmt: skip
            if self.dp_shard < self.dp * self.cp and self.zero != 3:
                raise LayoutError(f"dp_shard({self.dp_shard}) < dp * cp ({self.dp * self.cp}) is HSDP, a ZeRO-3 "
                                  f"variant; got zero({self.zero})")  # fmt: skip
        if self.global_batch is not None:  # noqa: SIM102 (the None check reads apart from the arithmetic)
            if self.global_batch < 1 or self.global_batch % (self.micro_batch * self.dp):
                raise LayoutError(
                    f"global_batch({self.global_batch}) is not a positive multiple of "
                    f"micro_batch({self.micro_batch}) * dp({self.dp}) = {self.micro_batch * self.dp}"
                )
        if self.virtual_stages > 1 and self.pp == 1:
            raise LayoutError(f"virtual_stages({self.virtual_stages}) > 1 needs pp > 1, got pp(1)")
        if spec is not None:
            if spec.heads % self.tp:
                raise LayoutError(f"tp({self.tp}) does not divide num_attention_heads({spec.heads})")
            if not spec.mla and spec.kv_heads % self.tp and self.tp % spec.kv_heads:
                raise LayoutError(
                    f"tp({self.tp}) does not divide num_key_value_heads({spec.kv_heads}) "
                    f"(nor is it a multiple of it, which would replicate KV heads)"
                )
            if self.pipeline_split_embedding_loss and self.pp > 1:
                if self.pp * self.virtual_stages > spec.layers + 2:
                    raise LayoutError(
                        f"pp({self.pp}) * virtual_stages({self.virtual_stages}) > num_hidden_layers({spec.layers}) "
                        f"+ 2 (pipeline_split_embedding_loss: the embedding and the loss count as one slot each)"
                    )
            elif self.pp * self.virtual_stages > spec.layers:
                raise LayoutError(
                    f"pp({self.pp}) * virtual_stages({self.virtual_stages}) > num_hidden_layers({spec.layers})"
                    + (" (pipeline_split_embedding_loss would allow L + 2)" if self.pp > 1 else "")
                )
            if spec.moe and self.zero_shard < self.dp * self.cp:
                raise LayoutError(f"dp_shard({self.dp_shard}): HSDP is modelled for dense models only "
                                  f"({spec.name} has experts)")  # fmt: skip
            if self.ep > 1 or self.expert_tp != self.tp:
                if not spec.moe:
                    which = f"ep({self.ep}) > 1" if self.ep > 1 else f"etp({self.etp}) != tp({self.tp})"
                    raise LayoutError(f"{which} but the model has no experts")
                if spec.moe.num_experts % self.ep:
                    raise LayoutError(f"ep({self.ep}) does not divide num_experts({spec.moe.num_experts})")
                if spec.moe.expert_ffn_hidden % self.expert_tp:
                    raise LayoutError(f"etp({self.expert_tp}) does not divide moe_intermediate_size"
                                      f"({spec.moe.expert_ffn_hidden})")
        return self

    def text(self) -> str:
        """This layout as text (``layout_text``)."""
        return layout_text(self)


# The planner's fields, in ``Layout``'s names; ``recompute`` is an integer code there (index into RECOMPUTE).
_ARRAY_FIELDS = ("tp", "pp", "dp", "cp", "ep", "etp", "zero", "dp_shard", "micro_batch", "recompute",
                 "sequence_parallel", "virtual_stages", "offload_optimizer", "offload_activations")  # fmt: skip
_BOOL_FIELDS = ("sequence_parallel", "offload_optimizer", "offload_activations")


@dataclass(frozen=True)
class LayoutArrays:
    """Many layouts as one struct of equal-length numpy arrays, with ``Layout``'s field names.

    ``recompute`` holds codes (0 none, 1 selective, 2 full: ``RECOMPUTE``), ``sequence_parallel`` and the offload
    flags booleans, ``etp``
    the expert-tensor-parallel size in use and ``dp_shard`` the ZeRO shard group in use (never None). ``gpus`` is
    ``tp·pp·dp·cp``.
    """

    tp: np.ndarray
    pp: np.ndarray
    dp: np.ndarray
    cp: np.ndarray
    ep: np.ndarray
    etp: np.ndarray
    zero: np.ndarray
    dp_shard: np.ndarray
    micro_batch: np.ndarray
    recompute: np.ndarray
    sequence_parallel: np.ndarray
    virtual_stages: np.ndarray
    offload_optimizer: np.ndarray
    offload_activations: np.ndarray

    @property
    def gpus(self) -> np.ndarray:
        return np.asarray(self.tp * self.pp * self.dp * self.cp)

    def __len__(self) -> int:
        return int(self.tp.size)

    def take(self, index: Any) -> LayoutArrays:
        """The layouts at ``index`` (a boolean mask or integer indices)."""
        return LayoutArrays(**{f.name: getattr(self, f.name)[index] for f in fields(self)})

    def as_dict(self) -> dict[str, np.ndarray]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def kwargs(self) -> dict[str, Any]:
        """Keyword arguments of ``train_step_arrays`` / ``training_memory_arrays`` (same names)."""
        return self.as_dict()

    def layout(self, i: int, *, global_batch: int | None = None) -> Layout:
        """Entry ``i`` as a ``Layout``."""
        v = {k: int(getattr(self, k)[i]) for k in _ARRAY_FIELDS if k not in _BOOL_FIELDS}
        return Layout(tp=v["tp"], pp=v["pp"], dp=v["dp"], cp=v["cp"], ep=v["ep"],
                      etp=None if v["etp"] == v["tp"] else v["etp"], zero=v["zero"],
                      dp_shard=None if v["dp_shard"] == v["dp"] * v["cp"] else v["dp_shard"],
                      micro_batch=v["micro_batch"],
                      global_batch=global_batch, recompute=RECOMPUTE[v["recompute"]],
                      virtual_stages=v["virtual_stages"],
                      **{k: bool(getattr(self, k)[i]) for k in _BOOL_FIELDS})  # fmt: skip

    @classmethod
    def of(cls, layouts: list[Layout]) -> LayoutArrays:
        """Layouts as arrays (the inverse of ``layout``)."""
        cols: dict[str, list[Any]] = {k: [] for k in _ARRAY_FIELDS}
        for lay in layouts:
            if lay.pipeline_split_embedding_loss:
                raise LayoutError("pipeline_split_embedding_loss: the planner's arrays do not carry it (every "
                                  "planned layout has it off); estimate this layout with estimate_train")
            kw = lay.kwargs()
            for k in _ARRAY_FIELDS:
                cols[k].append(RECOMPUTE.index(kw[k]) if k == "recompute" else kw[k])
        return cls(**{k: np.asarray(v, dtype=bool if k in _BOOL_FIELDS else np.int64)
                      for k, v in cols.items()})  # fmt: skip


def layout_text(layout: Layout | Mapping[str, Any]) -> str:
    """A layout as short text: the axes that are not trivial, e.g. ``tp=2, pp=4 (interleaved x2), dp=8, ep=32,
    etp=1, ZeRO-1, selective recompute, SP, micro-batch 2``; ``single GPU`` when nothing is split. The one
    layout-to-text function of every output (terminal, explanations, HTML report).

    Takes a ``Layout`` or a mapping with its field names (the planner's options; ``recompute`` as a name or code;
    a serving layout's ``replicas`` and ``batch_per_replica``).
    """
    d = dataclasses.asdict(layout) if isinstance(layout, Layout) else dict(layout)
    if isinstance(layout, Layout):
        d["etp"] = layout.expert_tp
        d["dp_shard"] = layout.zero_shard
    parts = []
    for k in ("tp", "pp", "dp", "cp", "ep"):
        v = d.get(k, 1)
        if v != 1:
            chunks = d.get("virtual_stages", 1)
            parts.append(f"{k}={v}" + (f" (interleaved x{chunks})" if k == "pp" and chunks > 1 else ""))
    etp = d.get("etp")
    if d.get("ep", 1) > 1 and etp is not None and etp != d.get("tp", 1):
        parts.append(f"etp={etp}")
    z = d.get("zero", 0)
    group = d.get("dp", 1) * d.get("cp", 1)
    shard = d.get("dp_shard") or group
    if z and shard < group:
        parts.append(f"HSDP (shard {shard}, replicate {group // shard})")
    elif z:
        parts.append(f"ZeRO-{z}" if z < 3 else "ZeRO-3/FSDP")
    rc = d.get("recompute", "none")
    if rc not in ("none", 0):
        parts.append(f"{RECOMPUTE[rc] if isinstance(rc, int) else rc} recompute")
    if d.get("sequence_parallel"):
        parts.append("SP")
    if d.get("offload_optimizer"):
        parts.append("optimizer offload")
    if d.get("offload_activations"):
        parts.append("activation offload")
    if d.get("pipeline_split_embedding_loss") and d.get("pp", 1) > 1:
        parts.append("embedding/loss in pipeline split")
    if "micro_batch" in d:
        parts.append(f"micro-batch {d['micro_batch']}")
    if "replicas" in d:  # a serving layout (the planner's inference options)
        parts.append(f"{d['replicas']} replica{'s' if d['replicas'] != 1 else ''}")
    if "batch_per_replica" in d:
        parts.append(f"batch {d['batch_per_replica']} per replica")
    return ", ".join(parts) or "single GPU"
