"""Resolving an entry lays fabric then when blocks in order and substitutes references."""

from __future__ import annotations

import pytest

from cre.catalog import CatalogError, load_catalog, parse_catalog

from .texts import ENTRY, files


def test_blocks_apply_in_order_later_wins() -> None:
    """Fabric first, then the entry's blocks in file order; the last one sets SHARED."""
    resolved = parse_catalog(files()).resolve("comm/test", platform="aws", arch="h100", num_nodes=2)
    assert resolved.spec["env"] == {"SHARED": "when1", "MNNVL": "0", "FABRIC": "efa"}
    assert resolved.applied == (
        "_lib/platforms/aws.yaml:fabric[0]",
        "comm/test.yaml:when[0]",
        "comm/test.yaml:when[1]",
    )


def test_parameters_precedence_and_builtins() -> None:
    """User values beat when-block values, which beat defaults; built-ins come from the arch."""
    catalog = parse_catalog(files())
    resolved = catalog.resolve("comm/test", platform="aws", arch="gb200", num_nodes=3)
    assert resolved.spec["command"] == ["perf", "-e", "16G", "-n", "7", "-g", "4"]
    assert (resolved.gpus_per_node, resolved.mlnx_per_node) == (4, 2)
    assert resolved.spec["env"]["MNNVL"] == "1"
    user = catalog.resolve(
        "comm/test",
        platform="aws",
        arch="gb200",
        num_nodes=3,
        parameters={"iters": 9, "size": "1G"},
    )
    assert user.spec["command"][1:5] == ["-e", "1G", "-n", "9"]


def test_fabric_skipped_for_entries_without_fabric() -> None:
    """An entry with fabric: false gets no platform network fragment."""
    catalog = parse_catalog(files(entry=ENTRY.replace("fabric: true", "fabric: false")))
    resolved = catalog.resolve("comm/test", platform="aws", arch="h100", num_nodes=1)
    assert "FABRIC" not in resolved.spec["env"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"entry_name": "comm/nope"}, "unknown entry"),
        ({"platform": "gcp"}, "unknown platform"),
        ({"arch": "a100"}, "no architecture a100"),
        ({"num_nodes": 0}, "num_nodes must be >= 1"),
        ({"parameters": {"bogus": 1}}, "unknown parameter"),
        ({"parameters": {"iters": "9"}}, "expected int like the default"),
    ],
)
def test_resolve_errors(kwargs: dict[str, object], message: str) -> None:
    """Bad resolve requests fail with a CatalogError saying what is wrong."""
    args: dict[str, object] = {
        "entry_name": "comm/test",
        "platform": "aws",
        "arch": "h100",
        "num_nodes": 2,
    }
    args.update(kwargs)
    with pytest.raises(CatalogError, match=message):
        parse_catalog(files()).resolve(**args)  # type: ignore[arg-type]


def test_entry_platform_restriction() -> None:
    """An entry limited to some platforms refuses the others."""
    text = ENTRY + "platforms: [aws]\n"
    catalog = parse_catalog(files(entry=text))
    assert catalog.combinations() == [("comm/test", "aws", "gb200"), ("comm/test", "aws", "h100")]


def test_shipped_aws_h100_all_reduce_uses_efa() -> None:
    """AWS H100 all-reduce resolves to the EFA image, mpirun and efa 32 devices."""
    resolved = load_catalog().resolve(
        "communication/nccl-all-reduce", platform="aws", arch="h100", num_nodes=2
    )
    assert "nccl-tests" in resolved.spec["image"]
    assert resolved.spec["mpirun"]["path"] == "/opt/amazon/openmpi/bin/mpirun"
    assert resolved.spec["worker"]["resources"]["vpc.amazonaws.com/efa"] == 32
    assert resolved.spec["command"][0] == "/opt/nccl-tests/build/all_reduce_perf"


def test_shipped_integer_reference_in_quantity_resolves() -> None:
    """Azure's NIC count comes from mlnxPerNode through a lone reference."""
    resolved = load_catalog().resolve(
        "communication/nccl-all-reduce", platform="azure", arch="h100", num_nodes=2
    )
    assert resolved.spec["worker"]["resources"]["nvidia.com/mlnxnics"] == 8
