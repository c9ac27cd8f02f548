"""Every way a catalog file can be malformed fails at load with file, key path and problem."""

from __future__ import annotations

import pytest

from cre.catalog import CatalogError, parse_catalog

from .texts import ENTRY, GPU, PLATFORM, files


def _error(**overrides: str | None) -> CatalogError:
    with pytest.raises(CatalogError) as info:
        parse_catalog(files(**overrides))
    return info.value


def test_minimal_catalog_loads() -> None:
    """The fixture itself is valid, so each test below breaks exactly one thing."""
    catalog = parse_catalog(files())
    assert list(catalog.entries) == ["comm/test"]


def test_bad_yaml_names_file_and_line() -> None:
    """Unparseable YAML reports the file and the line and column of the problem."""
    err = _error(entry=ENTRY.replace("runtime: mpi", "runtime: [mpi"))
    assert err.file == "comm/test.yaml"
    assert err.path.startswith("line ")
    assert "invalid YAML" in err.problem


def test_duplicate_key_is_rejected() -> None:
    """A key given twice is an error, not a silent last-one-wins."""
    err = _error(entry=ENTRY + "runtime: mpi\n")
    assert "invalid YAML" in err.problem


def test_unknown_top_level_key() -> None:
    """A misspelt top-level key names itself and the known keys."""
    err = _error(entry=ENTRY + "measurment: {}\n")
    assert (err.path, err.problem.split(" (")[0]) == ("measurment", "unknown key")


def test_missing_required_key() -> None:
    """An entry without a description is rejected at that key."""
    err = _error(entry=ENTRY.replace("description: test entry\n", ""))
    assert (err.path, err.problem) == ("description", "required key is missing")


def test_unknown_key_inside_spec() -> None:
    """A typo deep in the spec is reported with its full key path."""
    err = _error(
        entry=ENTRY.replace("  image: img:1\n", "  image: img:1\n  worker: {enviroment: {}}\n")
    )
    assert err.path == "spec.worker.enviroment"
    assert err.problem.startswith("unknown key")


def test_wrong_type_in_spec() -> None:
    """A list where a mapping belongs is a type error at that path."""
    err = _error(entry=ENTRY.replace('env: {SHARED: entry, MNNVL: "${mnnvl}"}', "env: [a, b]"))
    assert (err.path, err.problem) == ("spec.env", "expected a mapping, got a list")


def test_wrong_type_for_integer() -> None:
    """A string where an integer belongs (not a lone reference) is rejected."""
    err = _error(entry=ENTRY.replace("timeoutSeconds: 60", "timeoutSeconds: soon"))
    assert err.path == "spec.timeoutSeconds"
    assert "expected a integer" in err.problem


def test_bad_runtime_value() -> None:
    """The runtime shape must be one of the known ones."""
    err = _error(entry=ENTRY.replace("runtime: mpi", "runtime: slurm"))
    assert err.path == "runtime"
    assert "slurm" in err.problem


def test_unknown_platform_in_when() -> None:
    """A when block selecting a platform the catalog does not ship is rejected."""
    err = _error(entry=ENTRY.replace("- platform: aws\n  spec:", "- platform: awz\n  spec:"))
    assert err.path == "when[1].platform"
    assert "unknown platform 'awz'" in err.problem


def test_unknown_arch_in_when() -> None:
    """A when block selecting an unknown architecture is rejected."""
    err = _error(entry=ENTRY.replace("arch: h100", "arch: {notIn: [h1000]}"))
    assert err.path == "when[0].arch"
    assert "unknown arch 'h1000'" in err.problem


def test_unknown_arch_in_platform() -> None:
    """A platform may only list architectures of the GPU defaults table."""
    err = _error(platform=PLATFORM.replace("gb200: {mlnxPerNode: 2}", "gb900: {}"))
    assert (err.file, err.path) == ("_lib/platforms/aws.yaml", "architectures.gb900")


def test_template_references_unknown_parameter() -> None:
    """``${name}`` must name a declared parameter or a built-in."""
    err = _error(entry=ENTRY.replace('"${size}"', '"${sise}"'))
    assert err.path == "spec.command[2]"
    assert "${sise} is neither a parameter" in err.problem


def test_platform_fabric_cannot_use_entry_parameters() -> None:
    """A platform fragment may only use built-ins, since it serves every entry."""
    err = _error(platform=PLATFORM.replace("FABRIC: efa", 'FABRIC: "${size}"'))
    assert err.file == "_lib/platforms/aws.yaml"
    assert err.path == "fabric[0].spec.env.FABRIC"


def test_malformed_template() -> None:
    """An unterminated ``${`` is an error rather than a literal."""
    err = _error(entry=ENTRY.replace('"${size}"', '"${size"'))
    assert "malformed reference" in err.problem


def test_parameter_shadowing_builtin() -> None:
    """A parameter may not hide a built-in such as gpusPerNode."""
    err = _error(entry=ENTRY.replace("  iters:", "  gpusPerNode:"))
    assert (err.path, err.problem) == ("parameters.gpusPerNode", "shadows a built-in value")


def test_parameter_default_must_be_scalar() -> None:
    """Parameter defaults are strings, integers or booleans."""
    err = _error(entry=ENTRY.replace("default: 16G", "default: [16G]"))
    assert err.path == "parameters.size.default"


def test_when_parameter_must_be_declared() -> None:
    """A when block can only set parameters the entry declares."""
    err = _error(entry=ENTRY.replace("parameters: {iters: 7}", "parameters: {iterz: 7}"))
    assert (err.path, err.problem) == ("when[1].parameters.iterz", "not a declared parameter")


def test_when_parameter_type_must_match_default() -> None:
    """A when block's parameter value has the default's type."""
    err = _error(entry=ENTRY.replace("parameters: {iters: 7}", "parameters: {iters: seven}"))
    assert err.path == "when[1].parameters.iters"
    assert "expected int" in err.problem


def test_when_block_needs_a_selector() -> None:
    """A when block without platform or arch would always apply; that belongs in spec."""
    err = _error(entry=ENTRY.replace("- platform: aws\n  spec:", "- spec:"))
    assert (err.path, err.problem) == ("when[1]", "a block needs a platform or arch selector")


def test_mpi_entry_needs_mpirun() -> None:
    """An mpi entry without mpirun cannot build a launcher command."""
    err = _error(entry=ENTRY.replace("  mpirun: {path: /bin/mpirun}\n", ""))
    assert err.path == "spec.mpirun"


def test_single_pod_entry_cannot_have_launcher() -> None:
    """Launcher settings on a single-pod entry would be silently ignored, so they fail."""
    text = ENTRY.replace("runtime: mpi", "runtime: single-pod").replace(
        "  mpirun: {path: /bin/mpirun}\n", "  launcher: {backoffLimit: 1}\n"
    )
    err = _error(entry=text)
    assert err.path == "spec.launcher"


def test_entry_must_be_one_level_deep() -> None:
    """Entries live at <domain>/<name>.yaml, nothing deeper."""
    err = _error(**{"comm/deep/test.yaml": ENTRY})
    assert err.file == "comm/deep/test.yaml"


def test_gpu_defaults_required() -> None:
    """Without the GPU defaults table nothing can resolve."""
    err = _error(gpu=None)
    assert err.file == "_lib/gpu-defaults.yaml"


def test_gpu_defaults_need_positive_gpus() -> None:
    """gpusPerNode 0 would render pods that request no GPUs."""
    err = _error(gpu=GPU.replace("gpusPerNode: 8", "gpusPerNode: 0"))
    assert err.path == "architectures.h100.gpusPerNode"


def test_platform_file_name_matches_name() -> None:
    """A platform's name must match its file so lookups and errors agree."""
    err = _error(platform=PLATFORM.replace("name: aws", "name: gcp"))
    assert err.path == "name"


def test_top_level_must_be_mapping() -> None:
    """An entry that is a YAML list is rejected at the top level."""
    err = _error(entry="- a\n- b\n")
    assert err.path == "(top level)"


def test_unknown_entry_platforms_restriction() -> None:
    """``platforms:`` may only name shipped platforms."""
    err = _error(entry=ENTRY + "platforms: [aws, mars]\n")
    assert (err.path, err.problem) == ("platforms", "unknown platform 'mars'")


def test_measurement_needs_test_type() -> None:
    """A measurement block without testType is incomplete."""
    err = _error(entry=ENTRY + "measurement: {logProfile: nccl-bandwidth}\n")
    assert err.path == "measurement.testType"
