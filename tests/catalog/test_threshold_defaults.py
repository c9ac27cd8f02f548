"""Default thresholds per platform / architecture in a catalog entry: selected like ``when``
blocks and merged key by key, each block naming its source; a bad block fails at load with the
file and the key; a Certification naming no thresholds gets them (with the source on its
Workflow), one naming its own (even an empty map) does not."""

from __future__ import annotations

import pytest

from cre.api import labels as L
from cre.catalog import CatalogError, parse_catalog
from cre.core.certification.build import build_workflow, discover_for
from cre.core.workflow.discovery import DiscoveryFailure
from tests.core.tierworld import certification, nodes

from .texts import ENTRY, files

MEASURED = ENTRY + "measurement: {logProfile: nccl-bandwidth, testType: all_reduce}\n"
DEFAULTS = MEASURED + """\
thresholds:
- arch: h100
  thresholds: {busBandwidthGBps: "value >= 300", algBandwidthGBps: "value >= 100"}
  source: vendor datasheet H100 SXM, NVLink 4
- platform: aws
  arch: h100
  thresholds: {busBandwidthGBps: "value >= 340"}
  source: measured on aws p5.48xlarge, 2026-11
- arch: gb200
  thresholds: {busBandwidthGBps: "value >= 700"}
  source: vendor datasheet GB200 NVL72
"""


def _error(entry: str) -> CatalogError:
    with pytest.raises(CatalogError) as info:
        parse_catalog(files(entry=entry))
    return info.value


def test_blocks_merge_key_by_key_and_name_their_sources() -> None:
    """aws/h100 takes the arch block's algBW and the platform block's busBW (later wins),
    with both sources; gb200 only its own block; an unselected pair gets nothing."""
    entry = parse_catalog(files(entry=DEFAULTS)).entries["comm/test"]
    assert entry.default_thresholds("aws", "h100") == (
        {"busBandwidthGBps": "value >= 340", "algBandwidthGBps": "value >= 100"},
        ("vendor datasheet H100 SXM, NVLink 4", "measured on aws p5.48xlarge, 2026-11"))
    assert entry.default_thresholds("aws", "gb200") == (
        {"busBandwidthGBps": "value >= 700"}, ("vendor datasheet GB200 NVL72",))
    assert entry.default_thresholds("aws", "a100") == ({}, ())


@pytest.mark.parametrize(("broken", "path", "problem"), [
    (DEFAULTS.replace("algBandwidthGBps", "algBandwidth"),
     "thresholds[0].thresholds.algBandwidth", "unknown threshold key"),
    (DEFAULTS.replace('"value >= 340"', '"value >="'),
     "thresholds[1].thresholds.busBandwidthGBps", "invalid CEL expression"),
    (DEFAULTS.replace("  source: vendor datasheet GB200 NVL72\n", ""),
     "thresholds[2].source", "required key is missing"),
    (DEFAULTS.replace("source: vendor datasheet GB200 NVL72", 'source: " "'),
     "thresholds[2].source", "name where the figures come from"),
    (DEFAULTS.replace("- arch: gb200", "- arch: b300"), "thresholds[2].arch",
     "unknown arch 'b300'"),
    (DEFAULTS.replace("- arch: gb200\n", "- \n"), "thresholds[2]",
     "a block needs a platform or arch selector"),
    (DEFAULTS.replace(MEASURED, ENTRY), "thresholds",
     "default thresholds need a measurement to judge"),
])
def test_a_bad_block_fails_at_load_with_file_and_key(broken: str, path: str,
                                                     problem: str) -> None:
    """Each malformed block is refused when the catalog loads, naming file and key path."""
    err = _error(broken)
    assert (err.file, err.path) == ("comm/test.yaml", path)
    assert err.problem.startswith(problem), err.problem


def _built(**options: object) -> dict[str, object]:
    catalog = parse_catalog(files(entry=DEFAULTS.replace(
        "runtime: mpi", "runtime: mpi\nplatforms: [aws]")))
    cert = certification(("comm", "test"), **options)
    found = discover_for(cert, 0, nodes(2), catalog)
    assert not isinstance(found, DiscoveryFailure), found
    return build_workflow(cert, 0, found=found, catalog=catalog)


def _perf(wf: dict[str, object]) -> object:
    spec = wf["spec"]
    assert isinstance(spec, dict)
    return spec.get("validation")


def test_a_certification_without_thresholds_gets_the_defaults_with_their_source() -> None:
    """No thresholds named: the Workflow judges the entry's aws/h100 defaults and says where
    they come from; named thresholds win; an empty map opts out."""
    wf = _built()
    assert _perf(wf) == {"performance": {"enabled": True, "thresholds": {"thresholds": {
        "busBandwidthGBps": "value >= 340", "algBandwidthGBps": "value >= 100"}}}}
    meta = wf["metadata"]
    assert isinstance(meta, dict)
    assert meta["annotations"] == {L.THRESHOLDS_SOURCE: "vendor datasheet H100 SXM, NVLink 4; "
                                   "measured on aws p5.48xlarge, 2026-11"}
    own = _built(thresholds={"busBandwidthGBps": "value >= 1"})
    assert _perf(own) == {"performance": {"enabled": True, "thresholds": {
        "thresholds": {"busBandwidthGBps": "value >= 1"}}}}
    assert "annotations" not in own["metadata"]  # type: ignore[operator]
    assert _perf(_built(thresholds={})) is None


# Every default the shipped catalog carries: (entry, platform, arch) -> (busBW floor, the
# reference document it is taken from). A default added without a row here fails the test.
SHIPPED = {
    ("communication/nccl-all-reduce", "azure", "a100"):
        (50, "docs/designs/031-platform-aware-nccl-config.md"),
    ("communication/nccl-all-reduce", "azure", "h100"):
        (150, "config/samples/cre_v1alpha1_certification_azure_h100_nccl.yaml"),
    ("communication/nccl-all-gather", "azure", "a100"):
        (50, "config/samples/cre_v1alpha1_certification_azure_a100_nccl.yaml"),
    ("communication/nccl-all-gather", "azure", "h100"):
        (150, "config/samples/cre_v1alpha1_certification_azure_h100_nccl.yaml"),
    ("communication/nccl-alltoall", "azure", "a100"):
        (30, "config/samples/cre_v1alpha1_certification_azure_a100_nccl.yaml"),
    ("communication/nccl-alltoall", "azure", "h100"):
        (100, "config/samples/cre_v1alpha1_certification_azure_h100_nccl.yaml"),
}


def test_every_shipped_default_threshold_names_a_citable_source() -> None:
    """Each default thresholds block the shipped catalog carries names the reference document
    its figure comes from (by path), the figure it says, and nothing else ships: every
    (entry, platform, arch) the catalog can render has exactly the defaults of SHIPPED."""
    from cre.catalog import load_catalog

    catalog = load_catalog()
    for name, block in ((e.name, b) for e in catalog.entries.values()
                        for b in e.threshold_defaults):
        assert block.source.strip(), f"{name}: {block.label} has no source"
    for name, platform, arch in catalog.combinations():
        thresholds, sources = catalog.entries[name].default_thresholds(platform, arch)
        want = SHIPPED.get((name, platform, arch))
        if want is None:
            assert (thresholds, sources) == ({}, ()), (name, platform, arch)
            continue
        floor, document = want
        assert thresholds == {"busBandwidthGBps": f"value >= {floor}"}, (name, platform, arch)
        assert len(sources) == 1 and document in sources[0], sources
        assert f"{floor} GB/s" in sources[0], f"{name}: the source does not state {floor} GB/s"


def test_a_certification_on_azure_gets_the_sourced_default_on_its_workflow() -> None:
    """A Certification on Azure A100 that names no thresholds gets the reference's 50 GB/s
    all-reduce floor, with its source (ADR-031) on its Workflow; on AWS H100 nothing ships."""
    from cre.catalog import load_catalog
    from tests.core.tierworld import gpu_node

    catalog = load_catalog()
    entry = catalog.entries["communication/nccl-all-reduce"]
    thresholds, _ = entry.default_thresholds("azure", "a100")
    assert entry.default_thresholds("aws", "h100") == ({}, ())
    azure = tuple(gpu_node(f"a{i}", product="NVIDIA-A100-SXM4-80GB",
                           provider="azure:///subscriptions/x/vm-a") for i in range(2))
    cert = certification(("communication", "nccl-all-reduce"))
    found = discover_for(cert, 0, azure, catalog)
    assert not isinstance(found, DiscoveryFailure), found
    wf = build_workflow(cert, 0, found=found, catalog=catalog)
    assert wf["spec"]["validation"]["performance"]["thresholds"]["thresholds"] == thresholds
    assert "ADR-031" in wf["metadata"]["annotations"][L.THRESHOLDS_SOURCE]
