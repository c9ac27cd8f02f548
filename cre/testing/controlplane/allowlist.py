"""Documented differences between the emulator and kube-apiserver 1.34 in the differential.

Every entry names the script (fnmatch), the JSON path of the recorded responses (fnmatch,
``step[i].body.a.b``; ``[[]`` matches a literal ``[``) and why the difference is accepted rather
than fixed in the emulator. docs/design/016-real-control-plane.md reproduces this table.
"""

from __future__ import annotations

from .differential import Allowed

_MANAGED = ("managedFields bookkeeping outside server-side apply: the real field manager "
            "records the object as decoded and defaulted, before the registry strategy sets "
            "server-owned fields (pod status, a Job's generated selector, a Service's cluster "
            "IPs), marks owned maps and list items with '.', and treats atomic maps (a "
            "Service's selector) as one field; the emulator attributes the stored object. "
            "Conflicts and ownership under server-side apply are compared, and equal, in "
            "the server_side_apply script")

ALLOWED: tuple[Allowed, ...] = (
    Allowed("[!s]*", "*.metadata.managedFields*", _MANAGED),
    Allowed("s[!e]*", "*.metadata.managedFields*", _MANAGED),
)
