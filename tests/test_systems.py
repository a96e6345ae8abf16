"""Systems as catalog data: tiers innermost first, every accelerator with a default, each tier sourced.

Expected numbers are hand-copied from the reference sources (validation/reference/components/sources.md and the
rows it describes) or from gpus.yaml read with the yaml module, never from systems.yaml through the code under test.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

import scaleright
from scaleright.catalog.systems import FABRIC_OF_KIND, TIER_KINDS, System, Tier, list_systems, system_for
from scaleright.errors import InputError, UnknownNameError


def _catalog_yaml(name: str) -> list[dict]:
    """A built-in catalog file read with the yaml module, not through the code under test."""
    return yaml.safe_load((Path(scaleright.__file__).parent / "catalog" / "data" / name).read_text())


GPUS_YAML = _catalog_yaml("gpus.yaml")
GPU_BY_ID = {g["id"]: g for g in GPUS_YAML}


def test_every_catalog_accelerator_has_a_default_system():
    missing = []
    for gid in GPU_BY_ID:
        try:
            system_for(gid)
        except UnknownNameError:
            missing.append(gid)
    assert missing == []


def test_every_tier_is_sourced_and_every_kind_has_a_fabric():
    for s in list_systems():
        assert s.source.strip(), s.id
        for t in s.tiers:
            assert t.source.strip(), (s.id, t.kind)
            if t.derived:
                assert "gpus.yaml" in t.source, (s.id, t.kind, t.source)
    assert set(FABRIC_OF_KIND) == set(TIER_KINDS)


def test_hgx_h100_is_nvswitch_450_then_one_400g_rail_per_gpu():
    # S1 network/README.md: NVLink 4 is 450 GB/s one direction per GPU; NDR is 400 Gb/s = 50 GB/s per NIC,
    # one NIC per GPU on HGX H100
    s = system_for("h100-sxm")
    assert [t.kind for t in s.tiers] == ["nvswitch", "infiniband"]
    assert (s.tiers[0].domain_gpus, s.tiers[0].bandwidth_gb_per_s, s.tiers[0].in_network_reduction) == (8, 450.0, True)
    assert (s.tiers[1].bandwidth_gb_per_s, s.tiers[1].shared_by_gpus) == (50.0, 1.0)
    assert s.gpus_per_node == 8


def test_dgx_a100_has_no_nvls_and_eight_hdr_rails():
    s = system_for("a100-80gb")
    assert (s.tiers[0].bandwidth_gb_per_s, s.tiers[0].in_network_reduction) == (300.0, False)
    assert (s.tiers[1].bandwidth_gb_per_s, s.tiers[1].shared_by_gpus) == (200 / 8, 1.0)


def test_nccl_tests_119_node_has_four_hdr_nics_for_eight_gpus():
    # nccl-tests issue #119: 3 nodes x 8 A100-40GB, 4x 200 Gb/s HDR HCAs per node
    s = system_for("a100-40gb", system="hgx-a100-4hdr")
    nic = s.nic
    assert nic is not None and nic.bandwidth_gb_per_s == 25.0 and s.gpus_per_node / nic.shared_by_gpus == 4


def test_gb200_nvlink_domain_is_the_72_gpu_rack_but_a_host_is_4_gpus():
    s = system_for("gb200")
    assert s.tiers[0].domain_gpus == 72 and s.gpus_per_node == 4


def test_rtx_4090_default_box_has_no_p2p_and_the_tinybox_has_it():
    assert system_for("rtx-4090").tiers[0].kind == "pcie-host"  # stock driver: no P2P on GeForce 40 (S8)
    assert system_for("rtx-4090", system="tinybox-4090-p2p").tiers[0].kind == "pcie-p2p"
    assert system_for("rtx-4090", p2p=True).tiers[0].kind == "pcie-p2p"


def test_tpu_v5p_is_a_3d_torus_of_8960_chips():
    t = system_for("tpu-v5p").tiers[0]
    assert t.kind == "ici" and len(t.torus_dims) == 3 and t.domain_gpus == 8960


@pytest.mark.parametrize("gid", sorted(GPU_BY_ID))
def test_derived_tiers_equal_the_accelerator_fields_they_come_from(gid):
    g = GPU_BY_ID[gid]
    s = system_for(gid)
    inner, nic = s.tiers[0], s.nic
    if inner.derived and inner.kind != "roce-mesh" and len(s.tiers) == 2:
        assert inner.bandwidth_gb_per_s == pytest.approx(g["intra_node_gb_per_s_per_gpu"])
    if nic is not None and nic.derived:
        assert nic.bandwidth_gb_per_s * 8 / nic.shared_by_gpus == pytest.approx(g["nic_gbps_per_gpu"], rel=1e-3)


def _tier(**kw):
    base = {"kind": "nvswitch", "domain_gpus": 8, "bandwidth_gb_per_s": 450.0, "source": "test"}
    return {**base, **kw}


def test_unknown_tier_key_is_rejected_by_name():
    with pytest.raises(ValidationError, match="bandwidth_gbps"):
        Tier.model_validate(_tier(bandwidth_gbps=3))


def test_nic_tier_must_be_last_and_domains_must_grow():
    nic = {"kind": "infiniband", "bandwidth_gb_per_s": 50.0, "source": "t"}
    with pytest.raises(ValidationError, match="must be the last one"):
        System(id="x", name="x", accelerators=["h100-sxm"], gpus_per_node=8, source="t",
               tiers=[nic, _tier()])  # fmt: skip
    with pytest.raises(ValidationError, match="must grow strictly"):
        System(id="x", name="x", accelerators=["h100-sxm"], gpus_per_node=8, source="t",
               tiers=[_tier(domain_gpus=8), _tier(domain_gpus=8, kind="pcie-p2p")])  # fmt: skip
    with pytest.raises(ValidationError, match="domain_gpus must be empty"):
        Tier.model_validate({**nic, "domain_gpus": 8})


def test_torus_dims_must_multiply_to_the_domain():
    with pytest.raises(ValidationError, match="multiply to 12, not domain_gpus=16"):
        Tier.model_validate(_tier(kind="ici", domain_gpus=16, torus_dims=[3, 4]))


def test_overrides_and_their_errors():
    s = system_for("h100-sxm", nic_gbps_per_gpu=200)
    assert (s.nic.bandwidth_gb_per_s, s.nic.shared_by_gpus) == (25.0, 1.0)
    s = system_for("h100-sxm", gpus_per_node=4)
    assert (s.gpus_per_node, s.tiers[0].domain_gpus) == (4, 4)
    with pytest.raises(UnknownNameError, match="unknown system 'dgx-z'"):
        system_for("h100-sxm", system="dgx-z")
    with pytest.raises(InputError, match="does not apply to GPU h100-sxm"):
        system_for("h100-sxm", system="dgx-a100")
    with pytest.raises(InputError, match="p2p=True: the innermost tier of hgx-h100 is nvswitch"):
        system_for("h100-sxm", p2p=True)


SYSTEMS_YAML = _catalog_yaml("systems.yaml")


@pytest.mark.parametrize("entry", SYSTEMS_YAML, ids=[d["id"] for d in SYSTEMS_YAML])
def test_a_system_without_overrides_is_its_file_entry_validated_and_a_copy_of_its_own(entry):
    """No override: the entry as systems.yaml states it (read with the yaml module, validated here), every field
    set as validation sets it; a copy, so a caller that edits its lists leaves the catalog untouched."""
    want = System.model_validate(entry)
    got = system_for(entry["accelerators"][0], system=entry["id"])
    assert got == want and got.model_dump() == want.model_dump()
    got.tiers.clear()
    got.accelerators.clear()
    assert system_for(entry["accelerators"][0], system=entry["id"]) == want


def test_the_default_host_memory_is_what_validation_makes_of_it():
    """DEFAULT_HOST_MEMORY is built without validation (no validator at import): its values pass every bound."""
    from scaleright.catalog.systems import DEFAULT_HOST_MEMORY, HostMemory

    assert HostMemory.model_validate(DEFAULT_HOST_MEMORY.model_dump()) == DEFAULT_HOST_MEMORY
    assert HostMemory.model_validate(DEFAULT_HOST_MEMORY.model_dump(exclude_unset=True)) == DEFAULT_HOST_MEMORY
