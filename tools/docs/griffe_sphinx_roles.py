"""Griffe extension: turn the docstrings' Sphinx roles into mkdocstrings cross-references.

CRE's docstrings are prose with reST inline markup: ``code`` in double backticks (which Markdown
renders as code too) and roles such as :class:`Plan`, :func:`~cre.core.job.reconcile.reconcile_job`
or :mod:`.sequences`. mkdocstrings renders Markdown, where a role would show as raw text. Rather
than rewrite every docstring in the house, this extension rewrites each role, once the package
is loaded, into an autorefs link ``[`Plan`][cre.core.common.plan.Plan]``, the name resolved the way
Python would see it from the documented object (its members, its module's imports, its parents).

Strictness, so `make docs` (``mkdocs build --strict``) fails on a broken reference:

- a role naming an object that exists in a CRE package becomes a link to its canonical path;
  when the reference pages do not publish that object (an internal module, a member without a
  docstring) the name is shown as code, as mkdocstrings does for its own signature links;
- a role whose name does not exist (a typo, a renamed or removed object) stays a required link
  to the name as written: autorefs reports it as unresolved and the strict build fails;
- a role naming something outside CRE (``datetime``, ``asyncio.Task``, kubernetes-asyncio) is
  rendered as code: there is no inventory of those sites to link to.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:class|func|meth|attr|mod|data|exc|obj|const|type):`([^`]+)`")
OWN = ("cre", "cre_manager")
logger = griffe.logger


class SphinxRoles(griffe.Extension):
    """Rewrite Sphinx roles in every docstring of the loaded package.

    ``packages`` names the packages whose objects are linked (default: CRE's two).
    """

    def __init__(self, packages: tuple[str, ...] | list[str] = OWN) -> None:
        super().__init__()
        self.packages = tuple(packages)

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        if pkg.name not in self.packages:
            return
        seen: set[int] = set()
        self._walk(pkg, loader, seen)

    def _walk(self, obj: griffe.Object, loader: griffe.GriffeLoader, seen: set[int]) -> None:
        if id(obj) in seen:
            return
        seen.add(id(obj))
        if obj.docstring is not None and ":" in obj.docstring.value:
            obj.docstring.value = ROLE.sub(lambda m: self._link(obj, loader, m.group(1)),
                                           obj.docstring.value)
        for member in obj.members.values():
            if not member.is_alias:
                self._walk(member, loader, seen)  # type: ignore[arg-type]

    def _link(self, obj: griffe.Object, loader: griffe.GriffeLoader, target: str) -> str:
        text = target
        if target.startswith("~"):
            target = target[1:]
            text = target.rsplit(".", 1)[-1]
        elif target.startswith("."):
            text = target.lstrip(".")
        path = self._resolve(obj, target)
        if path is not None and path.split(".", 1)[0] not in self.packages:
            return f"`{text}`"
        found = self._canonical(loader, path) if path is not None else None
        if found is None:  # no such object: a required link, which autorefs reports
            where = f"{obj.relative_filepath}:{obj.lineno or 1}"
            logger.warning("%s: %s: Sphinx role names no object: %s", where, obj.path, target)
            return f"[`{text}`][{path or target.lstrip('.')}]"
        code = text.replace("&", "&amp;").replace("<", "&lt;")
        return f'<autoref identifier="{found}" optional><code>{code}</code></autoref>'

    def _resolve(self, obj: griffe.Object, target: str) -> str | None:
        if target.startswith("."):  # relative to the module's package, as Sphinx reads it
            module = obj.module
            base = module.path if module.is_init_module else module.parent.path  # type: ignore[union-attr]
            return f"{base}.{target.lstrip('.')}"
        head, _, rest = target.partition(".")
        if head in self.packages:
            return target
        scope: griffe.Object | None = obj
        while scope is not None:
            try:
                found = scope.resolve(head)
            except griffe.NameResolutionError:
                scope = scope.parent
                continue
            return f"{found}.{rest}" if rest else found
        return None

    @staticmethod
    def _canonical(loader: griffe.GriffeLoader, path: str) -> str | None:
        """The canonical path of the object at ``path``; ``None`` when there is none."""
        top = path.split(".", 1)[0]
        if top not in loader.modules_collection.members:
            try:  # a reference into the other CRE package (cre <-> cre_manager)
                loader.load(top)
            except ImportError:
                return None
        try:
            found = loader.modules_collection.get_member(path)
        except (KeyError, ValueError, AttributeError):
            return None
        try:
            return str(found.final_target.path if found.is_alias else found.path)
        except (griffe.AliasResolutionError, griffe.CyclicAliasError):
            return None
