"""Fixtures of the image tests: the built image (cached by its inputs) and a stack to run it on.

Building needs buildah, mmdebstrap and runc (Debian packages; ``make test`` installs them). Where
they cannot be installed the tests are skipped with the package names in the reason.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from image.build import ToolsMissing, build_image, ensure_tools  # noqa: E402
from image.run import WorkingContainer  # noqa: E402


@pytest.fixture(scope="session")
def image_ref() -> str:
    """``cre-manager:<version>``, built (or found up to date) in buildah's local storage."""
    try:
        ensure_tools()
    except ToolsMissing as exc:
        pytest.skip(str(exc))
    return build_image(archive=False)


@pytest.fixture(scope="module")
def image_root(image_ref: str) -> Iterator[WorkingContainer]:
    """A working container of the image with its root filesystem mounted (for inspection)."""
    with WorkingContainer(image_ref) as ctr:
        yield ctr
