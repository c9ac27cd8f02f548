"""Secrets never reach logs, events or statuses: the manager's token and planted Secret data are
absent from all of its output and from every object version written while it ran."""

from __future__ import annotations

import base64
import secrets as stdlib_secrets

from e2e_helpers import apply_job, create_namespace, gpu_nodes, wait_phase

from cre.testing.procs import Stack


def _needles(text: str) -> dict[str, str]:
    """The planted string and the encodings it could leak in."""
    return {"plain": text, "base64": base64.b64encode(text.encode()).decode(),
            "base64url": base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")}


def test_token_and_secret_data_never_leak(cluster_stack: Stack) -> None:
    stack = cluster_stack
    token = f"cre-e2e-token-{stdlib_secrets.token_hex(16)}"
    planted = f"planted-secret-{stdlib_secrets.token_hex(16)}"
    create_namespace(stack, "cre-system")
    stack.emulator_control("POST", "journal")
    for ns in ("default", "cre-system"):
        encoded = base64.b64encode(planted.encode()).decode()
        stack.kubectl("apply", "-f", "-", stdin=(
            f"apiVersion: v1\nkind: Secret\nmetadata: {{name: planted, namespace: {ns}}}\n"
            f"type: Opaque\ndata: {{password: {encoded}}}\nstringData: {{token: {planted}}}\n"))
    manager = stack.start_manager(
        "--log-level", "debug", "--leader-elect", "--leader-elect-lease-namespace",
        "cre-system", kubeconfig=stack.kubeconfig_with_token(token, "manager-kubeconfig"))

    nodes = gpu_nodes(stack)
    apply_job(stack, "leak-ok", nodes=nodes)
    wait_phase(stack, "leak-ok", "Succeeded")
    # A Job naming a node that does not exist: more events and statuses to scan.
    apply_job(stack, "leak-bad", nodes=[*nodes[:1], "no-such-node"])
    manager.stop()

    journal = stack.emulator_control("GET", "journal")
    assert journal["dropped"] == 0
    written = [o for o in journal["objects"]
               if not (o["resource"] == "secrets" and o["object"]["metadata"]["name"]
                       == "planted")]
    planted_versions = [str(o["object"]) for o in journal["objects"] if o not in written]
    # The scan sees what it looks for: the Secrets themselves hold the planted data.
    assert planted_versions and all(_needles(planted)["base64"] in text
                                    for text in planted_versions)
    kinds = {o["resource"] for o in written}
    assert {"jobs", "events", "trainjobs", "leases"} <= kinds, kinds
    texts = {"manager output": manager.log_text()}
    texts.update({f'{o["resource"]} {o["object"]["metadata"].get("namespace", "")}/'
                  f'{o["object"]["metadata"]["name"]} v{i}': str(o["object"])
                  for i, o in enumerate(written)})
    assert len(texts["manager output"]) > 10_000  # debug output: there was much to scan
    for label, needle in {**{f"token {k}": v for k, v in _needles(token).items()},
                          **{f"secret {k}": v for k, v in _needles(planted).items()}}.items():
        leaks = [where for where, text in texts.items() if needle in text]
        assert not leaks, f"{label} found in {leaks[:5]}"
