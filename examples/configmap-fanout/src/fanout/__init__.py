"""ConfigMap fan-out: a source ConfigMap is copied into every namespace its annotation lists.

Label a ConfigMap ``fanout.example.dev/source: "true"`` and annotate it
``fanout.example.dev/targets: "team-a,team-b"``: the controller keeps a copy of it (same name,
same data) in each target namespace, updates the copies when the source changes, deletes a copy
whose namespace left the list, and deletes every copy before the source goes (a finalizer:
owner references cannot cross namespaces).
"""

from fanout.controller import COPY_OF, FINALIZER, SOURCE, TARGETS, FanOut, build

__all__ = ["COPY_OF", "FINALIZER", "SOURCE", "TARGETS", "FanOut", "build"]
