"""CRE's KWOK stage configuration (pure: the stage documents, no KWOK process)."""

from __future__ import annotations

from typing import Any

import pytest

from cre.testing.controlplane.kwok import IMAGE_PULL_ERROR, PULL, pod_annotations, stages


def _by_name() -> dict[str, dict[str, Any]]:
    return {s["metadata"]["name"]: s for s in stages()}


def test_an_annotated_pod_cycles_through_the_image_pull_waits_and_never_runs() -> None:
    """A pod annotated with an image-pull error is never started by the running stage; three
    stages cycle it ErrImagePull -> ImagePullBackOff (1 s) -> ErrImagePull (10 s) with the
    kubelet's messages built from the image and the annotation."""
    by_name = _by_name()
    running = by_name["cre-pod-running"]["spec"]["selector"]["matchExpressions"]
    assert {"key": PULL, "operator": "DoesNotExist"} in running
    failed = by_name["cre-pod-image-pull-failed"]["spec"]
    backoff = by_name["cre-pod-image-pull-backoff"]["spec"]
    retry = by_name["cre-pod-image-pull-retry"]["spec"]
    for spec in (failed, backoff, retry):
        assert {"key": PULL, "operator": "Exists"} in spec["selector"]["matchExpressions"]
        assert IMAGE_PULL_ERROR in spec["next"]["statusTemplate"]
    assert "reason: ErrImagePull" in failed["next"]["statusTemplate"]
    assert 'printf "Failed to pull image %q: %s"' in failed["next"]["statusTemplate"]
    assert "reason: ImagePullBackOff" in backoff["next"]["statusTemplate"]
    assert ('printf "Back-off pulling image %q: ErrImagePull: %s"'
            in backoff["next"]["statusTemplate"])
    assert (backoff["delay"]["durationMilliseconds"], retry["delay"]["durationMilliseconds"]) \
        == (1000, 10000)
    assert "reason: ErrImagePull" in retry["next"]["statusTemplate"]


def test_pod_annotations_carry_the_image_pull_cause_and_refuse_an_empty_one() -> None:
    """``pod_annotations(image_pull_error=...)`` sets the annotation the stages select on;
    an empty cause is refused, naming the annotation."""
    assert pod_annotations(image_pull_error="manifest unknown", exit_code=0) == {
        IMAGE_PULL_ERROR: "manifest unknown", "cre.dev/kwok-exit-code": "0"}
    with pytest.raises(ValueError, match=IMAGE_PULL_ERROR):
        pod_annotations(image_pull_error=" ")
