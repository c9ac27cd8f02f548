"""Documented differences between the emulator and kube-apiserver 1.34 in the differential.

Every entry names the script (fnmatch), the JSON path of the recorded responses (fnmatch,
``step[i].body.a.b``) and why the difference is accepted rather than fixed in the emulator.
docs/design/016-real-control-plane.md reproduces this table.
"""

from __future__ import annotations

from .differential import Allowed

ALLOWED: tuple[Allowed, ...] = ()
