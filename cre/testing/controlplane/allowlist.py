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
    Allowed("*", "*.metadata.managedFields*", _MANAGED, unless=("server_side_apply",)),
    Allowed("service_defaulting", "step[[]0].body.spec.clusterIP*",
            "kube-apiserver allocates a random free address of its service range; the "
            "emulator hands them out in order from 10.96.0.10 so runs repeat"),
    Allowed("pagination", "step[[]*].body.message",
            "a malformed continue token is reported with the decoder's own error text (Go's "
            "encoding/json there, Python's codecs here); status, reason and the 'invalid "
            "continue token' prefix agree"),
    Allowed("patch_types", "step[[]10].body.message",
            "a body that is not JSON is reported as 'error decoding patch: ' and the decoder's "
            "own error text (Go's encoding/json there, orjson here)"),
    Allowed("pod_binding", "step[[]1].body.*message",
            "kube-apiserver appends a diff of the old and new Go PodSpec structs (its field "
            "names, its line offsets) to the 'pod updates may not change fields' message; the "
            "emulator sends the sentence alone. Code, reason, field and the sentence agree"),
    Allowed("table_output", "step[[]*].body.columnDefinitions[[]*].description",
            "column descriptions are upstream's API documentation text, which the emulator "
            "words itself rather than copies; names, types, formats and priorities agree"),
    Allowed("pod_defaulting", "step[[]0].wire.bytes",
            "a built-in's fields below metadata are written by kube-apiserver in its Go "
            "struct's declared order (a PodSpec's restartPolicy before "
            "terminationGracePeriodSeconds, a Container's resources before "
            "terminationMessagePath); the emulator writes TypeMeta and ObjectMeta in Go's order "
            "(cre.testing.apiserver.keyorder) and the rest in the order it stored. The parsed "
            "body is compared, and equal, at step[0].body; the other sampled bytes (ConfigMaps, "
            "their lists, custom resources) are equal"),
    Allowed("kubectl_patch", "step[[]6].stderr",
            "kube-apiserver appends a diff of the old and new Go PodSpec structs to the 'pod "
            "updates may not change fields' message (kubectl prints it on further lines); the "
            "emulator sends the sentence alone. Exit code and the sentence agree"),
)
