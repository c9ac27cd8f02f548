"""What the apiextensions controllers write into a CRD's status, done synchronously.

On a real server the naming and establishing controllers set ``acceptedNames``,
``NamesAccepted`` and ``Established`` shortly after create; the emulator sets them in the create
response path (as the reference allows), and keeps ``storedVersions`` growing on updates.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import errors
from .store import Obj

if TYPE_CHECKING:
    from .writectx import WriteContext

CRD_QUALIFIED = errors.Qualified(
    "apiextensions.k8s.io", "customresourcedefinitions", "CustomResourceDefinition"
)


def crd_terminating(objs: WriteContext, crd_name: str) -> bool:
    crd = objs.store.get(("apiextensions.k8s.io", "customresourcedefinitions"), ("", crd_name))
    return bool(crd and crd["metadata"].get("deletionTimestamp"))

def crd_created(objs: WriteContext, crd: Obj) -> None:
    causes = objs.admission.check_crd(crd)
    if causes:
        raise errors.invalid_object(
            CRD_QUALIFIED,
            str(crd["metadata"].get("name", "")),
            causes,
        )
    spec = crd.get("spec") or {}
    names = dict(spec.get("names") or {})
    names.setdefault("singular", str(names.get("kind", "")).lower())
    names.setdefault("listKind", f"{names.get('kind', '')}List")
    storage = [v["name"] for v in spec.get("versions") or [] if v.get("storage")]
    now = objs.now()
    crd["status"] = {
        "acceptedNames": names,
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
             "message": "no conflicts found", "lastTransitionTime": now},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
             "message": "the initial names have been accepted", "lastTransitionTime": now},
        ],
        "storedVersions": storage,
    }

def crd_updated(objs: WriteContext, old: Obj, new: Obj) -> None:
    if old.get("spec") != new.get("spec"):
        causes = objs.admission.check_crd(new)
        if causes:
            raise errors.invalid_object(
                CRD_QUALIFIED,
                str(new["metadata"].get("name", "")),
                causes,
            )
        status = dict(new.get("status") or old.get("status") or {})
        stored = list(status.get("storedVersions") or [])
        for v in (new.get("spec") or {}).get("versions") or []:
            if v.get("storage") and v.get("name") not in stored:
                stored.append(v["name"])
        status["storedVersions"] = stored
        new["status"] = status


