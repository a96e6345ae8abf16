"""The on-disk catalog cache (``scaleright.catalog.cache``): a hit gives the catalog the files give, an edited file
is never answered from a stale entry, a corrupt, foreign or unwritable cache costs only the speed-up, and a hit
parses no YAML and builds no validator.
The reference for "the catalog the files give" is the loader with the cache off (``SCALERIGHT_NO_CACHE=1``)."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

import scaleright.catalog.store as store
import scaleright.catalog.systems as systems
from scaleright.catalog import Catalog
from scaleright.catalog.cache import CACHE_ENV, FORMAT, KEEP, NO_CACHE_ENV

HEADER = "gpu_id,kind,usd,usd_low,usd_high,unit,provider,sku,date,source,notes\n"


def _fresh() -> None:
    store._load.cache_clear()
    store._builtin.cache_clear()
    systems._builtin.cache_clear()


@pytest.fixture
def cache(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv(CACHE_ENV, str(d))
    monkeypatch.delenv(NO_CACHE_ENV, raising=False)
    _fresh()
    yield d
    _fresh()


def _uncached(monkeypatch, user_dir=None) -> Catalog:
    monkeypatch.setenv(NO_CACHE_ENV, "1")
    _fresh()
    try:
        return Catalog.load(user_dir)
    finally:
        monkeypatch.delenv(NO_CACHE_ENV)
        _fresh()


def _same_catalog(a: Catalog, b: Catalog) -> None:
    assert list(a.gpus) == list(b.gpus) and dict(a.gpus) == dict(b.gpus)
    assert all(a.gpus[k].model_fields_set == b.gpus[k].model_fields_set for k in a.gpus)
    assert list(a.models) == list(b.models) and dict(a.models) == dict(b.models)
    assert a.prices == b.prices
    assert dict(a.model_configs) == dict(b.model_configs)
    assert dict(a._gpu_index) == dict(b._gpu_index) and dict(a._model_index) == dict(b._model_index)


def _user_dir(d: Path, usd: str = "2.5") -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / "prices.csv").write_text(HEADER + f"h100-sxm,on-demand,{usd},,,usd_per_gpu_hour,p,,2026-01-15,src,\n")
    return d


def test_a_cache_hit_is_the_catalog_the_files_give(cache, monkeypatch):
    Catalog.load()  # writes the built-in layer
    assert len(list(cache.glob("catalog-*.pickle"))) == 1
    _fresh()
    hit = Catalog.load()
    _same_catalog(hit, _uncached(monkeypatch))


def test_a_user_layer_is_cached_and_an_edit_is_never_answered_from_the_old_entry(cache, tmp_path, monkeypatch):
    user = _user_dir(tmp_path / "cat", usd="2.5")
    first = Catalog.load(user)
    assert len(list(cache.glob("catalog-*.pickle"))) == 2  # built-in and user layers
    _user_dir(user, usd="3.75")
    _fresh()
    edited = Catalog.load(user)
    mine = [r.usd for r in edited.prices if r.gpu_id == "h100-sxm" and r.provider == "p"]
    assert mine == [3.75], mine
    assert [r.usd for r in first.prices if r.gpu_id == "h100-sxm" and r.provider == "p"] == [2.5]
    _same_catalog(edited, _uncached(monkeypatch, user))


def _truncated(b: bytes) -> bytes:
    return b[: len(b) // 2]


@pytest.mark.parametrize("junk", [lambda b: b"", _truncated, lambda b: b"\xff\xfe\x00" + b[3:],
                                  lambda b: pickle.dumps({"format": FORMAT, "key": "another key", "entries": {}}),
                                  lambda b: b"{not a pickle"])  # fmt: skip
def test_a_corrupt_cache_file_is_ignored_and_rewritten(cache, monkeypatch, junk):
    Catalog.load()
    (f,) = cache.glob("catalog-*.pickle")
    f.write_bytes(junk(f.read_bytes()))
    _fresh()
    _same_catalog(Catalog.load(), _uncached(monkeypatch))
    assert pickle.loads(f.read_bytes())["format"] == FORMAT  # rewritten


def test_entries_of_the_wrong_kind_are_ignored(cache, monkeypatch):
    Catalog.load()
    (f,) = cache.glob("catalog-*.pickle")
    data = pickle.loads(f.read_bytes())
    gid = next(iter(data["entries"]["gpus"]))
    data["entries"]["gpus"][gid] = {"id": gid, "memory_gb": -1}  # a dict, not a validated Accelerator
    f.write_bytes(pickle.dumps(data))
    _fresh()
    _same_catalog(Catalog.load(), _uncached(monkeypatch))


def test_an_unwritable_cache_directory_costs_nothing_but_speed(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv(CACHE_ENV, str(blocker / "sub"))  # a directory under a regular file cannot be made
    _fresh()
    try:
        _same_catalog(Catalog.load(), _uncached(monkeypatch))
    finally:
        _fresh()


def test_the_cache_can_be_turned_off(cache, monkeypatch):
    monkeypatch.setenv(NO_CACHE_ENV, "1")
    Catalog.load()
    assert not cache.exists()


def test_old_entries_are_pruned_and_foreign_files_left_alone(cache, tmp_path):
    cache.mkdir()
    for i in range(KEEP + 3):
        p = cache / f"catalog-{i:064x}.pickle"
        p.write_text("{}")
        os.utime(p, ns=(i * 10**9, i * 10**9))
    mine = cache / "catalog-notes.pickle"
    mine.write_text("keep me")
    Catalog.load()
    left = sorted(p.name for p in cache.glob("catalog-*.pickle"))
    assert "catalog-notes.pickle" in left and len(left) == KEEP + 1
    assert f"catalog-{0:064x}.pickle" not in left  # the oldest went


def test_the_built_in_systems_are_cached_too(cache, monkeypatch):
    first = systems.list_systems()
    assert len(list(cache.glob("catalog-*.pickle"))) == 1
    _fresh()
    hit = systems.list_systems()
    monkeypatch.setenv(NO_CACHE_ENV, "1")
    _fresh()
    parsed = systems.list_systems()
    assert hit == parsed == first
    assert [s.model_fields_set for s in hit] == [s.model_fields_set for s in parsed]
    (f,) = cache.glob("catalog-*.pickle")
    f.write_bytes(pickle.dumps({"format": FORMAT, "key": f.stem.removeprefix("catalog-"), "entries": ({"id": 5},)}))
    monkeypatch.delenv(NO_CACHE_ENV)
    _fresh()
    assert systems.list_systems() == parsed  # entries that are not Systems are ignored


def test_the_collective_fits_are_cached_and_a_hit_is_the_parsed_file(cache, monkeypatch):
    from scaleright.estimate.collectives import CollectiveFits

    monkeypatch.setenv(NO_CACHE_ENV, "1")
    CollectiveFits.builtin.cache_clear()
    parsed = CollectiveFits.builtin()
    monkeypatch.delenv(NO_CACHE_ENV)
    CollectiveFits.builtin.cache_clear()
    first = CollectiveFits.builtin()  # a miss: parsed and written
    assert len(list(cache.glob("catalog-*.pickle"))) == 1
    CollectiveFits.builtin.cache_clear()
    hit = CollectiveFits.builtin()
    CollectiveFits.builtin.cache_clear()
    assert hit == first == parsed and hit.fabrics["nvswitch"].eta == parsed.fabrics["nvswitch"].eta
    (f,) = cache.glob("catalog-*.pickle")
    f.write_bytes(pickle.dumps({"format": FORMAT, "key": f.stem.removeprefix("catalog-"), "entries": ["junk"]}))
    assert CollectiveFits.builtin() == parsed  # what is not a mapping is ignored (and the file rewritten)
    CollectiveFits.builtin.cache_clear()


def _twice_fresh(code: str, cache) -> list[str]:
    """What ``code`` prints in two fresh interpreters in turn, with the cache in ``cache``: a miss, then a hit."""
    env = {**os.environ, CACHE_ENV: str(cache)}
    return [subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
            for _ in range(2)]  # fmt: skip


def test_a_cache_hit_parses_no_yaml_and_builds_no_validator(cache):
    code = ("import sys; from scaleright.catalog import Catalog; from scaleright.catalog.systems import list_systems; "
            "from scaleright.catalog.gpus import Accelerator; Catalog.load(); list_systems(); "
            "print('yaml' in sys.modules or Accelerator.__pydantic_complete__)")
    runs = _twice_fresh(code, cache)
    assert runs == ["True\n", "False\n"], runs


def test_a_built_in_system_builds_no_validator_on_a_cache_hit(cache):
    """A built-in system without overrides is the validated entry, not validated again."""
    code = ("from scaleright.catalog import Catalog; from scaleright.catalog.systems import System, HostMemory, "
            "system_for; Catalog.load(); system_for('h100-sxm'); system_for('tpu-v5p'); "
            "print(System.__pydantic_complete__, HostMemory.__pydantic_complete__)")
    runs = _twice_fresh(code, cache)
    assert runs[1] == "False False\n", runs
