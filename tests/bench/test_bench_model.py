"""The benchmark GPT: closed-form parameter count, KV-cache decoding, preset and dim validation."""

from __future__ import annotations

import pytest

from scaleright.bench import PRESETS, gpt_spec
from scaleright.errors import InputError, UnknownNameError

torch = pytest.importorskip("torch")

from scaleright.bench.model import GPT, KVCache  # noqa: E402

ODD = {"layers": 3, "hidden": 48, "heads": 6, "vocab": 100, "seq_len": 20}


@pytest.mark.parametrize("dims", [PRESETS["tiny"], ODD])
def test_closed_form_param_count_equals_counted_parameters(dims):
    spec = gpt_spec(None, **dims)
    counted = sum(p.numel() for p in GPT(spec).parameters())  # tied head counted once
    assert counted == spec.params


def test_gpt2_small_has_the_published_size():
    # Hugging Face "gpt2" (vocab 50257, tied head): 124,439,808 parameters, the "124M" of GPT-2 small.
    assert gpt_spec("small", vocab=50257).params == 124_439_808
    # nanoGPT prints 123.69M for vocab 50304, excluding the position embedding (get_num_params(non_embedding=True)).
    small = gpt_spec("small")
    assert (small.params - small.seq_len * small.hidden) / 1e6 == pytest.approx(123.69, abs=0.005)


def test_kv_cache_decoding_reproduces_the_full_forward():
    torch.manual_seed(0)
    spec = gpt_spec("tiny")
    model = GPT(spec).eval()
    tokens = torch.randint(0, spec.vocab, (2, 12))
    with torch.inference_mode():
        full = model(tokens)
        cache = KVCache(spec, 2, device=torch.device("cpu"), dtype=torch.float32)
        steps = [model(tokens[:, :8], cache, 0)[:, -1]]
        steps += [model(tokens[:, i : i + 1], cache, i)[:, -1] for i in range(8, 12)]
    torch.testing.assert_close(torch.stack(steps[1:], 1), full[:, 8:12], rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(steps[0], full[:, 7], rtol=1e-4, atol=1e-4)


def test_overrides_replace_preset_dims():
    spec = gpt_spec("tiny", layers=4, seq_len=32)
    assert (spec.layers, spec.hidden, spec.seq_len) == (4, 64, 32)


def test_heads_must_divide_hidden_with_operands_in_message():
    with pytest.raises(InputError, match="heads=5 does not divide hidden=64"):
        gpt_spec("tiny", heads=5)


def test_unknown_preset_suggests_close_names():
    with pytest.raises(UnknownNameError, match="unknown model preset 'tinny'; closest: tiny"):
        gpt_spec("tinny")


def test_no_preset_needs_every_dim():
    with pytest.raises(InputError, match="--vocab, --seq-len"):
        gpt_spec(None, layers=1, hidden=8, heads=2)
