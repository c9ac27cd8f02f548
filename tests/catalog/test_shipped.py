"""The shipped catalog loads, has the promised entries and platforms, and is found on disk."""

from __future__ import annotations

from pathlib import Path

import pytest

from cre.catalog import (
    ArchDefaults,
    CatalogError,
    RuntimeShape,
    default_catalog_dir,
    load_catalog,
    loader,
)

ENTRIES = {
    "communication/nccl-all-reduce": RuntimeShape.MPI,
    "communication/nccl-all-gather": RuntimeShape.MPI,
    "communication/nccl-alltoall": RuntimeShape.MPI,
    "communication/nccl-loopback": RuntimeShape.SINGLE_POD,
    "communication/nccl-loopback-nvswitch": RuntimeShape.SINGLE_POD,
    **{f"diagnostics/dcgm-level{i}": RuntimeShape.SINGLE_POD for i in range(1, 5)},
    "training/nemotron5-8b": RuntimeShape.TORCH,
    "training/nemotron5-56b": RuntimeShape.TORCH,
}


def test_every_entry_ships_with_its_runtime_shape() -> None:
    """The nine entries of the brief and the two training entries exist with their shape."""
    catalog = load_catalog()
    assert {n: e.runtime for n, e in catalog.entries.items()} == ENTRIES


def test_platforms_and_architectures() -> None:
    """Each platform supports the architectures the brief lists."""
    catalog = load_catalog()
    assert {p: sorted(d.architectures) for p, d in catalog.platforms.items()} == {
        "aws": ["gb200", "gb300", "h100"],
        "gcp": ["gb200", "gb300", "h100"],
        "azure": ["a100", "h100"],
        "oci": ["gb200", "gb300", "l40s"],
        "nscale": ["b200", "gb300"],
        "onprem": ["b200", "b300", "gb200", "gb300"],
    }


def test_gpu_defaults_table_and_platform_overrides() -> None:
    """The GPU defaults match the reference table; OCI overrides l40s/gb200/gb300 NIC counts."""
    catalog = load_catalog()
    assert catalog.gpu_defaults["h100"] == ArchDefaults(8, 8)
    assert catalog.gpu_defaults["l40"] == ArchDefaults(8, 4)
    assert catalog.gpu_defaults["gb200"] == ArchDefaults(4, 8)
    assert catalog.gpu_defaults["rtxpro6000"] == ArchDefaults(8, 0)
    oci = catalog.platforms["oci"].architectures
    assert (oci["l40s"], oci["gb200"], oci["gb300"]) == (
        ArchDefaults(4, 2),
        ArchDefaults(4, 0),
        ArchDefaults(4, 4),
    )


def test_combinations_cover_every_entry_on_every_platform_arch() -> None:
    """Eleven entries on 17 (platform, arch) pairs make 187 renderable combinations."""
    assert len(load_catalog().combinations()) == 11 * 17


def test_default_dir_is_the_repository_catalog_in_an_editable_install() -> None:
    """From a source checkout the shipped catalog is the top-level catalog/ folder."""
    assert default_catalog_dir() == Path(loader.__file__).resolve().parents[2] / "catalog"


def test_default_dir_prefers_the_wheel_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a wheel the catalog is force-included as cre/_catalog and is found there."""
    wheel_copy = tmp_path / "cre" / "_catalog"
    (wheel_copy / "_lib").mkdir(parents=True)
    (wheel_copy / "_lib" / "gpu-defaults.yaml").write_text("architectures: {}\n")
    monkeypatch.setattr(loader, "_PACKAGE", tmp_path / "cre")
    assert default_catalog_dir() == wheel_copy


def test_no_catalog_anywhere_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without either copy the loader says where it looked."""
    monkeypatch.setattr(loader, "_PACKAGE", tmp_path / "cre")
    with pytest.raises(CatalogError, match="no shipped catalog"):
        default_catalog_dir()


def test_missing_directory(tmp_path: Path) -> None:
    """Loading a directory that does not exist names it."""
    with pytest.raises(CatalogError, match="does not exist"):
        load_catalog(tmp_path / "nope")
