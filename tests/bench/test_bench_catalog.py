"""``bench train --model <catalog model>``: a Llama-family decoder with random weights, counted against a hand-written
closed form, refused up front when it cannot fit, and run on CPU with gloo over 2 ranks with FSDP2 meta-device
initialisation (each rank materialises only its shards)."""

from __future__ import annotations

import json
import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scaleright.bench import RunStore
from scaleright.bench._torch import torch_installed
from scaleright.bench.config import TrainBenchConfig
from scaleright.bench.fit import META, WHOLE, build_path
from scaleright.bench.spec import decoder_spec

needs_torch = pytest.mark.skipif(not torch_installed(), reason="torch is not installed (the bench extra)")


def closed_form_params(*, V: int, h: int, L: int, nh: int, nkv: int, hd: int, inner: int, tied: bool,
                       qkv_bias: bool = False, qk_norm: bool = False) -> int:
    """Llama-family decoder (HF modeling_llama / modeling_qwen2 / modeling_qwen3): embedding V*h (and an untied
    head V*h); per layer q (h x nh*hd), k and v (h x nkv*hd each), o (nh*hd x h), q/k/v biases (Qwen2), q/k RMSNorm
    weights hd each (Qwen3), SwiGLU gate, up (h x I) and down (I x h), two RMSNorm weights h; final RMSNorm h."""
    attn = h * nh * hd + 2 * h * nkv * hd + nh * hd * h + (nh * hd + 2 * nkv * hd if qkv_bias else 0)
    attn += 2 * hd if qk_norm else 0
    layer = attn + 3 * h * inner + 2 * h
    return V * h * (1 if tied else 2) + L * layer + h


# Shapes as their config.json files give them (src/scaleright/catalog/data/models/*.json)
SHAPES = {
    "llama-3.2-1b": dict(V=128256, h=2048, L=16, nh=32, nkv=8, hd=64, inner=8192, tied=True),
    "llama-3.1-8b": dict(V=128256, h=4096, L=32, nh=32, nkv=8, hd=128, inner=14336, tied=False),
    "llama-3.1-70b": dict(V=128256, h=8192, L=80, nh=64, nkv=8, hd=128, inner=28672, tied=False),
    "qwen2.5-7b": dict(V=152064, h=3584, L=28, nh=28, nkv=4, hd=128, inner=18944, tied=False, qkv_bias=True),
    "qwen3-8b": dict(V=151936, h=4096, L=36, nh=32, nkv=8, hd=128, inner=12288, tied=False, qk_norm=True),
}


@pytest.mark.parametrize("name", SHAPES)
def test_parameter_count_is_the_closed_form_full_and_truncated(name):
    full, cut = decoder_spec(name), decoder_spec(name, layers=2, vocab=256)
    assert full.params == full.catalog_params == closed_form_params(**SHAPES[name])
    assert not full.truncated and cut.truncated
    assert cut.params == closed_form_params(**{**SHAPES[name], "L": 2, "V": 256})
    assert cut.catalog_params == full.params


def test_full_size_counts_match_the_model_cards():
    # meta-llama model cards: Llama 3.2 1B "1.23B"; Llama 3.1 8B "8B" (8.03B counted from the config, SOURCES.md)
    assert decoder_spec("llama-3.2-1b").params / 1e9 == pytest.approx(1.23, abs=0.01)
    assert decoder_spec("llama-3.1-8b").params / 1e9 == pytest.approx(8.03, abs=0.01)


@needs_torch
@pytest.mark.parametrize("name", ["llama-3.2-1b", "qwen2.5-7b", "qwen3-8b"])
def test_module_built_on_meta_counts_the_closed_form(name):
    import torch

    from scaleright.bench.decoder import Decoder

    spec = decoder_spec(name, layers=2, vocab=300)
    with torch.device("meta"):  # shapes only: a full-depth 8B model costs nothing here
        counted = sum(p.numel() for p in Decoder(spec).parameters())  # a tied head counted once
        full = sum(p.numel() for p in Decoder(decoder_spec(name)).parameters())
    assert counted == closed_form_params(**{**SHAPES[name], "L": 2, "V": 300})
    assert full == closed_form_params(**SHAPES[name])


@needs_torch
def test_whole_model_init_follows_the_config_and_starts_near_ln_vocab():
    import torch
    import torch.nn.functional as F

    from scaleright.bench.config import Strategy
    from scaleright.bench.parallelize import build_model

    spec = decoder_spec("llama-3.2-1b", layers=1, vocab=256, seq_len=64)
    cfg = TrainBenchConfig(model=spec, strategy=Strategy.SINGLE, device="cpu")
    torch.manual_seed(0)
    model = build_model(cfg, torch.device("cpu"))
    w = model.blocks[0].mlp.gate_proj.weight.detach()
    assert float(w.std()) == pytest.approx(spec.initializer_range, rel=0.01)  # HF init: normal(0, 0.02)
    tokens = torch.randint(0, 256, (8, 65))
    with torch.no_grad():
        loss = float(F.cross_entropy(model(tokens[:, :-1]).reshape(-1, 256), tokens[:, 1:].reshape(-1)))
    # logits = W x with unit-RMS x (final RMSNorm, weight 1) and W ~ N(0, s^2): z ~ N(0, s^2 h), so the expected
    # loss at random init is E[logsumexp z] - E[z_y] = ln V + s^2 h / 2
    assert loss == pytest.approx(math.log(256) + 0.02**2 * 2048 / 2, abs=0.15)


def test_default_sequence_is_2048_within_the_context_and_sliding_window():
    assert decoder_spec("llama-3.1-8b").seq_len == 2048
    assert decoder_spec("phi-3-mini-4k").seq_len == 2047  # its config's sliding_window: full attention is the same


def test_build_path_is_meta_for_fsdp_and_whole_otherwise():
    spec = decoder_spec("llama-3.2-1b", layers=1)
    assert build_path(TrainBenchConfig(model=spec, strategy="fsdp-full", nproc=(2,))) == META
    assert build_path(TrainBenchConfig(model=spec, strategy="fsdp-grad-op", nproc=(2,))) == META
    assert build_path(TrainBenchConfig(model=spec, strategy="ddp", nproc=(2,))) == WHOLE


def _gb(message: str, after: str) -> float:
    return float(re.search(re.escape(after) + r"[^(]*\((\d+(?:\.\d+)?) GB", message).group(1))


@pytest.fixture
def gpu_80gb(monkeypatch):
    """nvidia-smi reporting 8 GPUs of 80 GB per node (an H100 SXM node)."""
    import scaleright.bench.fit as fit

    monkeypatch.setattr(fit, "_nvidia_smi_memory_gb", lambda: 80.0)
    monkeypatch.setattr(fit, "_gpus_per_node", lambda: 8)


P_8B = closed_form_params(**SHAPES["llama-3.1-8b"])


def test_8b_replicated_over_8_gpus_is_refused_naming_fsdp(run_cli, gpu_80gb, tmp_path):
    code, out, err = run_cli("bench", "train", "--model", "llama-3.1-8b", "--nproc", "8", "--strategy", "ddp",
                             "--device", "cuda", "--micro-batch", "1", "--seq-len", "2048", "--db", tmp_path / "r.db")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert "llama-3.1-8b does not fit world_size=8" in err and "80.0 GB" in err
    # replicated fp32 weights + fp32 gradients + two fp32 Adam moments: at least 16 B per parameter
    assert float(re.search(r"estimated (\d+\.\d) GB", err).group(1)) >= 16 * P_8B / 1e9
    # sharded 8 ways the same states need at least 16 B * P / 8 = 16.1 GB per GPU, which fits 80 GB
    assert 16 * P_8B / 8 / 1e9 <= _gb(err, "--strategy fsdp-full") <= 80.0
    assert not (tmp_path / "r.db").exists()  # refused before anything was created


def test_8b_on_one_gpu_is_refused_naming_how_many_ranks(run_cli, gpu_80gb, tmp_path):
    code, _, err = run_cli("bench", "train", "--model", "llama-3.1-8b", "--nproc", "1", "--strategy", "single",
                           "--device", "cuda", "--db", tmp_path / "r.db")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    ranks = int(re.search(r"(\d+) ranks \(--nproc \d+ --strategy fsdp-full --activation-checkpointing", err).group(1))
    assert 16 * P_8B / ranks / 1e9 <= 80.0  # the states alone must fit the ranks named


def test_70b_beyond_one_node_is_refused_naming_the_nodes(run_cli, gpu_80gb, tmp_path):
    code, _, err = run_cli("bench", "train", "--model", "llama-3.1-70b", "--nproc", "8", "--strategy", "fsdp-full",
                           "--precision", "bf16", "--micro-batch", "1", "--seq-len", "4096", "--device", "cuda",
                           "--db", tmp_path / "r.db")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    m = re.search(r"(\d+) ranks \(--nnodes (\d+) --nproc 8 --strategy fsdp-full", err)
    ranks, nodes = int(m.group(1)), int(m.group(2))
    assert ranks == 8 * nodes and nodes > 1
    # 16 B per parameter of states over 8 GPUs is 141 GB each: one node cannot; the ranks named must hold them
    assert 16 * closed_form_params(**SHAPES["llama-3.1-70b"]) / ranks / 1e9 <= 80.0


def test_a_model_no_host_can_hold_is_refused_with_truncation_named(run_cli, tmp_path):
    code, _, err = run_cli("bench", "train", "--model", "llama-3.1-405b", "--nproc", "2", "--strategy", "fsdp-full",
                           "--device", "cpu", "--db", tmp_path / "r.db")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "host MemAvailable" in err and "truncate with --layers or --vocab" in err


@pytest.mark.parametrize(("args", "message"), [
    (["--model", "llama-3.2-1b", "--hidden", "64"], "--hidden changes a preset's shape"),
    (["--model", "llama-3.2-1b", "--layers", "17"], "--layers=17: llama-3.2-1b has 16"),
    (["--model", "llama-3.2-1b", "--vocab", "200000"], "--vocab=200000: llama-3.2-1b has 128,256"),
    (["--model", "mixtral-8x7b"], "--model=mixtral-8x7b: mixture-of-experts is not built by bench train"),
    (["--model", "gemma-2-9b"], "family 'gemma2' is not built"),
    (["--model", "lama-3.2-1b"], "unknown model (a preset or a catalog model) 'lama-3.2-1b'; closest: llama-3.2-1b"),
    (["--model", "phi-3-mini-4k", "--seq-len", "4096"], "exceeds phi-3-mini-4k's sliding window of 2,047"),
    (["--model", "llama-3.2-1b", "--vocab", "1"], "--vocab=1: llama-3.2-1b has 128,256; --vocab truncates a catalog"),
])  # fmt: skip
def test_bad_catalog_model_input_is_one_line_exit_2(run_cli, args, message, tmp_path):
    code, out, err = run_cli("bench", "train", *args, "--device", "cpu", "--db", tmp_path / "r.db")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert message in err


VOCAB, H = 256, 2048


@needs_torch
@pytest.mark.slow
def test_truncated_llama_sharded_over_two_gloo_ranks_from_meta(cli, tmp_path):
    db = tmp_path / "runs.sqlite"
    proc = cli("bench", "train", "--model", "llama-3.2-1b", "--layers", 1, "--vocab", VOCAB, "--seq-len", 16,
               "--micro-batch", 2, "--nproc", 2, "--strategy", "fsdp-full", "--device", "cpu", "--steps", 1,
               "--warmup", 0, "--db", db, "--json")
    assert proc.returncode == 0, proc.stderr
    assert "meta-device init" in proc.stderr and ": fits;" in proc.stderr  # the path, said up front
    out = json.loads(proc.stdout)
    params = closed_form_params(**{**SHAPES["llama-3.2-1b"], "L": 1, "V": VOCAB})
    assert out["model"]["params"] == params and out["model"]["truncated"] is True
    [run] = out["runs"]
    assert run["init"].startswith("meta-device init")
    # each rank holds only its fp32 shards: together exactly the model, each half of it (FSDP2 shards dim 0)
    per_rank = run["param_bytes_per_rank"]
    assert sum(per_rank) == 4 * params
    assert all(b == pytest.approx(4 * params / 2, rel=0.01) for b in per_rank)
    # first step at random init: ln V + s^2 h / 2 (see the whole-model test); 2 ranks x 32 tokens
    assert math.isfinite(run["loss_initial"])
    assert run["loss_initial"] == pytest.approx(math.log(VOCAB) + 0.02**2 * H / 2, abs=0.4)

    [stored] = RunStore(db).list(kind="train")
    m = stored["model"]
    assert (m["name"], m["params"], m["truncated"]) == ("llama-3.2-1b", params, True)
    assert m["truncation"] == {"layers": [1, 16], "vocab": [VOCAB, 128256]}
    assert m["catalog_params"] == closed_form_params(**SHAPES["llama-3.2-1b"])
    assert m["config"]["num_hidden_layers"] == 1 and "layers" not in m  # not readable as the GPT-2 preset's dims
    assert stored["layout"]["init"].startswith("meta-device") and stored["layout"]["memory_estimate_gb"] > 0

    rep = cli("bench", "report", "--db", db, "--json")
    assert rep.returncode == 0, rep.stderr
    [group] = json.loads(rep.stdout)
    assert {k: group["key"][k] for k in ("name", "params", "truncated")} == {
        "name": "llama-3.2-1b", "params": params, "truncated": True}
    table = cli("bench", "report", "--db", db, env={"COLUMNS": "200"})
    assert "llama-3.2-1b 61.3M params (truncated: 1 of 16 layers, 256 of 128256 tokens)" in table.stdout


def test_calibration_reads_a_catalog_run_as_the_model_that_ran_not_the_gpt2_preset(make_run):
    from scaleright.bench.calibrate import run_inputs

    run = {**make_run(), "id": 7, "fingerprint": "abc"}
    run["model"] = decoder_spec("llama-3.2-1b", layers=1, vocab=256, seq_len=32).as_dict()
    ri = run_inputs(run)
    # Llama 3.2 1B's config.json: hidden 2048, 32 heads, 8 KV heads, SwiGLU 8192; truncated to 1 layer, 256 tokens
    spec = ri.spec
    assert (spec.family, spec.gated_mlp, spec.layers, spec.vocab) == ("llama", True, 1, 256)
    assert (spec.hidden, spec.heads, spec.kv_heads, spec.ffn_hidden) == (2048, 32, 8, 8192)
    assert ri.seq_len == 32


def test_a_catalog_run_without_its_config_is_refused_naming_the_run(make_run):
    from scaleright.bench.calibrate import run_inputs
    from scaleright.errors import InputError

    run = {**make_run(), "id": 7, "fingerprint": "abc"}
    run["model"] = {k: v for k, v in decoder_spec("llama-3.2-1b", layers=1, vocab=256, seq_len=32).as_dict().items()
                    if k != "config"}
    with pytest.raises(InputError, match="run 7: field 'config' is missing"):
        run_inputs(run)


def test_the_api_refuses_before_starting_anything(tmp_path):
    from scaleright.bench import run_train_bench
    from scaleright.errors import InputError

    store = RunStore(tmp_path / "r.db")
    cfg = TrainBenchConfig(model=decoder_spec("llama-3.1-405b"), strategy="fsdp-full", nproc=(2,), device="cpu")
    with pytest.raises(InputError, match=re.escape("llama-3.1-405b does not fit world_size=2")):
        run_train_bench(cfg, store=store)
    assert not (tmp_path / "r.db").exists()


def test_cpu_capacity_is_memavailable_in_kib_shared_by_the_ranks(tmp_path, monkeypatch):
    import scaleright.bench.fit as fit

    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       32000000 kB\nMemAvailable:   20000000 kB\n")  # /proc/meminfo: kibibytes
    assert fit._mem_available_gb(meminfo) == pytest.approx(20e6 * 1024 / 1e9)
    monkeypatch.setattr(fit, "_mem_available_gb", lambda: 20.48)
    assert fit.device_capacity_gb("cpu", 4)[:2] == ("cpu", pytest.approx(20.48 / 4))


_FAKE_NVIDIA_SMI = """#!/bin/sh
# answers NVIDIA's documented queries only, as a node of two GPUs of different memory
case "$*" in
  "--query-gpu=name,driver_version --format=csv,noheader")
    printf 'NVIDIA H100 80GB HBM3, 550.54.15\\nNVIDIA A100-SXM4-40GB, 550.54.15\\n' ;;
  "--query-gpu=memory.total --format=csv,noheader,nounits") printf '81559\\n40960\\n' ;;
  *) exit 2 ;;
esac
"""


@pytest.mark.parametrize("works", [True, False])
def test_the_gpu_names_and_memory_come_from_one_nvidia_smi_query(works, tmp_path, monkeypatch):
    """The fingerprint's names and driver and the fit's capacity (the smallest GPU's memory.total, MiB) are read by
    one query function; an nvidia-smi that fails leaves the names the workers reported and an unknown capacity."""
    import scaleright.bench.fit as fit
    from scaleright.bench.fingerprint import hardware_info

    exe = tmp_path / "nvidia-smi"
    exe.write_text(_FAKE_NVIDIA_SMI if works else "#!/bin/sh\nexit 1\n")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    fit._nvidia_smi_memory_gb.cache_clear()
    try:
        hw = hardware_info(["reported-gpu"])
        capacity = fit.device_capacity_gb("auto" if works else "cuda", 8)
    finally:
        fit._nvidia_smi_memory_gb.cache_clear()
    if works:
        assert (hw["gpus"], hw["gpu_count"], hw["driver_version"]) == (
            ["NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB"], 2, "550.54.15")
        assert capacity == ("cuda", pytest.approx(40960 * 2**20 / 1e9), "nvidia-smi memory.total of the smallest GPU")
    else:
        assert (hw["gpus"], hw["driver_version"]) == (["reported-gpu"], None)
        assert capacity == ("cuda", None, "nvidia-smi did not report the GPUs' memory")


def test_dry_run_reports_the_fit_on_this_machine_without_refusing(run_cli):
    code, out, err = run_cli("bench", "train", "--model", "llama-3.1-405b", "--nproc", "2", "--strategy", "fsdp",
                             "--device", "cpu", "--dry-run", "--json")
    assert code == 0, err
    [fit] = json.loads(out)["fit"]  # the command may be meant for another machine: said, not refused
    assert fit["fits"] is False and fit["path"] == META and fit["world_size"] == 2
    assert fit["estimate_gb"] >= 16 * decoder_spec("llama-3.1-405b").params / 2 / 1e9  # fp32 states, sharded 2 ways


DENSE = ["llama-3.2-1b", "llama-3.1-8b", "qwen2.5-7b", "qwen3-8b", "mistral-7b-v0.3", "phi-3-mini-4k"]


@settings(max_examples=40, deadline=None)
@given(name=st.sampled_from(DENSE), layers=st.integers(1, 4), k=st.integers(1, 8), mb=st.integers(1, 4),
       strategy=st.sampled_from(["fsdp-full", "fsdp-grad-op"]), ac=st.booleans(),
       device=st.sampled_from(["cuda", "cpu"]))
def test_more_ranks_never_raise_the_sharded_estimate_per_rank(name, layers, k, mb, strategy, ac, device):
    # the refusal's "more ranks" search relies on it: sharding over 2N ranks holds at most what N ranks hold
    from scaleright.bench.config import Strategy
    from scaleright.bench.fit import memory_estimate_gb

    spec = decoder_spec(name, layers=layers, seq_len=256)
    kw = {"spec": spec, "strategy": Strategy(strategy), "micro_batch": mb, "precision": "bf16",
          "activation_checkpointing": ac, "device_type": device}
    assert memory_estimate_gb(world_size=2 ** (k + 1), **kw) <= memory_estimate_gb(world_size=2**k, **kw)
