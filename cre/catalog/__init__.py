"""The workload catalog: declarative YAML entries, platforms and GPU defaults.

Load with ``load_catalog()`` (the shipped ``catalog/`` by default), pick an entry, and
``Catalog.resolve`` it for a platform, architecture and node count; ``cre.render`` turns the
result into manifests. Detection helpers answer which platform and architecture a cluster is.
"""

from cre.catalog.detect import (
    UNKNOWN_ARCH,
    Platform,
    architecture_from_product,
    detect_architecture,
    detect_platform,
)
from cre.catalog.errors import CatalogError
from cre.catalog.loader import default_catalog_dir, load_catalog, read_catalog_files
from cre.catalog.model import (
    ArchDefaults,
    Catalog,
    CatalogEntry,
    Fabric,
    Measurement,
    OverrideBlock,
    Parameter,
    PlatformData,
    ResolvedWorkload,
    RuntimeShape,
    Selector,
)
from cre.catalog.parse import parse_catalog

__all__ = [
    "UNKNOWN_ARCH",
    "ArchDefaults",
    "Catalog",
    "CatalogEntry",
    "CatalogError",
    "Fabric",
    "Measurement",
    "OverrideBlock",
    "Parameter",
    "Platform",
    "PlatformData",
    "ResolvedWorkload",
    "RuntimeShape",
    "Selector",
    "architecture_from_product",
    "default_catalog_dir",
    "detect_architecture",
    "detect_platform",
    "load_catalog",
    "parse_catalog",
    "read_catalog_files",
]
