"""Shared fixtures: the core objects of the workload and memory tests (STYLE habit 12).

Model specs are the Hugging Face ``config.json`` files shipped in ``scaleright/catalog/data/models``, loaded through
the public ``scaleright.workload.load_model``.
"""

from __future__ import annotations

import functools
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import settings

import scaleright
from scaleright.workload import TransformerSpec, from_hf_config, load_model

# Shared, noisy machines: no per-example time limit (speed is checked by benchmarks/, never by timed tests), and the
# same examples on every run so that CI cannot turn red on a newly drawn case that nobody saw locally.
settings.register_profile("scaleright", deadline=None, derandomize=True)
settings.load_profile("scaleright")

PACKAGE_MODELS_DIR = Path(scaleright.__file__).parent / "catalog" / "data" / "models"

# The suite never writes into the user's own state: saved calibration and engine profiles and the catalog cache go
# to a temporary folder for this session, inherited by the CLI subprocesses the tests start (the run store is always
# given with --db). A test that checks one of these variables sets its own with monkeypatch.
_STATE = Path(tempfile.mkdtemp(prefix="scaleright-tests-"))
for _var, _sub in (("SCALERIGHT_CALIBRATION_DIR", "calibrations"), ("SCALERIGHT_CACHE_DIR", "cache")):
    os.environ[_var] = str(_STATE / _sub)


def _shipped_names() -> list[str]:
    return sorted(p.stem for p in PACKAGE_MODELS_DIR.glob("*.json"))


@functools.cache
def _load(name: str) -> TransformerSpec:
    return load_model(name)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize ``shipped_model_name`` over every config the package ships."""
    if "shipped_model_name" in metafunc.fixturenames:
        metafunc.parametrize("shipped_model_name", _shipped_names())


@pytest.fixture(scope="session")
def models_dir() -> Path:
    """Directory the shipped model configs are read from (package data)."""
    return PACKAGE_MODELS_DIR


@pytest.fixture(scope="session")
def shipped_names() -> list[str]:
    """Catalog names (file stems) of every shipped config, for Hypothesis ``sampled_from``."""
    return _shipped_names()


@pytest.fixture(scope="session")
def load_spec() -> Callable[[str], TransformerSpec]:
    """Load a shipped model by catalog name (cached: specs are frozen)."""
    return _load


@pytest.fixture(scope="session")
def llama_8b() -> TransformerSpec:
    return _load("llama-3.1-8b")


@pytest.fixture(scope="session")
def llama_70b() -> TransformerSpec:
    return _load("llama-3.1-70b")


@pytest.fixture(scope="session")
def llama2_7b() -> TransformerSpec:
    return _load("llama-2-7b")


@pytest.fixture(scope="session")
def gpt2() -> TransformerSpec:
    return _load("gpt2")


@pytest.fixture(scope="session")
def mixtral_8x7b() -> TransformerSpec:
    return _load("mixtral-8x7b")


@pytest.fixture(scope="session")
def deepseek_v3() -> TransformerSpec:
    return _load("deepseek-v3")


@pytest.fixture(scope="session")
def gpt3_175b() -> TransformerSpec:
    """GPT-3 175B as shipped (``gpt3-175b.json``; shape from Brown et al. 2020, Table 2.1)."""
    return _load("gpt3-175b")


@pytest.fixture(scope="session")
def llama_65b() -> TransformerSpec:
    """LLaMA-65B (Touvron et al. 2023, arXiv:2302.13971), the model of the QLoRA paper's 48 GB claim.

    Table 2: dimension 8192, 64 heads, 80 layers; section 2.2: SwiGLU with hidden 2/3·4d rounded up to a multiple of
    256 (2/3·32768 = 21845.3 -> 22016); section 2.1: 32k-token BPE vocabulary (32000); untied output head.
    """
    cfg = {
        "model_type": "llama", "hidden_size": 8192, "num_attention_heads": 64, "num_hidden_layers": 80,
        "intermediate_size": 22016, "vocab_size": 32000, "tie_word_embeddings": False,
    }  # fmt: skip
    return from_hf_config(cfg, name="llama-65b", source="Touvron et al. 2023 Table 2")


@pytest.fixture(scope="session")
def llama_like_config() -> Callable[..., dict]:
    """Factory for a minimal Llama-family ``config.json`` dict; keyword arguments override fields."""

    def make(**overrides) -> dict:
        cfg = {
            "model_type": "llama", "hidden_size": 512, "num_attention_heads": 8, "num_key_value_heads": 8,
            "num_hidden_layers": 4, "intermediate_size": 1376, "vocab_size": 1000, "tie_word_embeddings": False,
        }  # fmt: skip
        cfg.update(overrides)
        return cfg

    return make
