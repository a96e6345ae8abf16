"""The on-disk catalog cache (``scaleright.catalog.cache``): a hit gives the catalog the files give, an edited file
is never answered from a stale entry, a corrupt or unwritable cache costs only the speed-up, and a hit parses no YAML.
The reference for "the catalog the files give" is the loader with the cache off (``SCALERIGHT_NO_CACHE=1``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import scaleright.catalog.store as store
import scaleright.catalog.systems as systems
from scaleright.catalog import Catalog
from scaleright.catalog.cache import CACHE_ENV, KEEP, NO_CACHE_ENV

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
    assert len(list(cache.glob("catalog-*.json"))) == 1
    _fresh()
    hit = Catalog.load()
    _same_catalog(hit, _uncached(monkeypatch))


def test_a_user_layer_is_cached_and_an_edit_is_never_answered_from_the_old_entry(cache, tmp_path, monkeypatch):
    user = _user_dir(tmp_path / "cat", usd="2.5")
    first = Catalog.load(user)
    assert len(list(cache.glob("catalog-*.json"))) == 2  # built-in and user layers
    _user_dir(user, usd="3.75")
    _fresh()
    edited = Catalog.load(user)
    mine = [r.usd for r in edited.prices if r.gpu_id == "h100-sxm" and r.kind == "on-demand"]
    assert mine == [3.75], mine
    assert [r.usd for r in first.prices if r.gpu_id == "h100-sxm" and r.kind == "on-demand"] == [2.5]
    _same_catalog(edited, _uncached(monkeypatch, user))


@pytest.mark.parametrize("junk", [b"", b"{not json", b'{"format": 1, "key": "other"}', b"\xff\xfe\x00"])
def test_a_corrupt_cache_file_is_ignored_and_rewritten(cache, monkeypatch, junk):
    Catalog.load()
    (f,) = cache.glob("catalog-*.json")
    f.write_bytes(junk)
    _fresh()
    _same_catalog(Catalog.load(), _uncached(monkeypatch))
    assert json.loads(f.read_bytes())["format"] == 1  # rewritten


def test_an_entry_that_fails_validation_is_ignored(cache, monkeypatch):
    Catalog.load()
    (f,) = cache.glob("catalog-*.json")
    data = json.loads(f.read_bytes())
    data["gpus"][0]["memory_gb"] = -1  # what the validators refuse
    f.write_text(json.dumps(data))
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
        p = cache / f"catalog-{i:064x}.json"
        p.write_text("{}")
        os.utime(p, ns=(i * 10**9, i * 10**9))
    mine = cache / "catalog-notes.json"
    mine.write_text("keep me")
    Catalog.load()
    left = sorted(p.name for p in cache.glob("catalog-*.json"))
    assert "catalog-notes.json" in left and len(left) == KEEP + 1
    assert f"catalog-{0:064x}.json" not in left  # the oldest went


def test_the_built_in_systems_are_cached_too(cache, monkeypatch):
    first = systems.list_systems()
    assert len(list(cache.glob("catalog-*.json"))) == 1
    _fresh()
    hit = systems.list_systems()
    monkeypatch.setenv(NO_CACHE_ENV, "1")
    _fresh()
    parsed = systems.list_systems()
    assert hit == parsed == first
    assert [s.model_fields_set for s in hit] == [s.model_fields_set for s in parsed]
    (f,) = cache.glob("catalog-*.json")
    f.write_text(json.dumps({"format": 1, "key": f.stem.removeprefix("catalog-"), "entries": [{"id": 5}]}))
    monkeypatch.delenv(NO_CACHE_ENV)
    _fresh()
    assert systems.list_systems() == parsed  # an entry that fails validation is ignored


def test_a_cache_hit_parses_no_yaml(cache):
    code = ("import sys; from scaleright.catalog import Catalog; from scaleright.catalog.systems import list_systems; "
            "Catalog.load(); list_systems(); print('yaml' in sys.modules)")
    env = {**os.environ, CACHE_ENV: str(cache)}
    runs = [subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
            for _ in range(2)]  # fmt: skip
    assert runs == ["True\n", "False\n"], runs
