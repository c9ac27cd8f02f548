"""The one error type of the catalog: which file, which key path, what is wrong.

A malformed entry must fail at load with enough context to fix it without reading the loader,
so every problem is reported as ``<file>: <key.path>: <problem>``.
"""

from __future__ import annotations


class CatalogError(ValueError):
    """A catalog file, or a request against the catalog, is invalid."""

    def __init__(self, file: str, path: str, problem: str) -> None:
        self.file = file
        self.path = path
        self.problem = problem
        where = f"{file}: {path}" if path else file
        super().__init__(f"{where}: {problem}")
