"""``python -m cre.testing.controlplane build|up|down|info``: the real control plane by hand.

``build`` makes (or reuses) the cached binaries and prints what it did as JSON (``--kwok`` adds
KWOK, ``--kwok-only`` builds KWOK alone, ``--workloads`` the JobSet and Trainer controllers);
``up`` starts a
detached plane in ``--dir`` and prints its kubeconfig path; ``down`` stops the plane recorded
in ``--dir``; ``info`` prints the pinned versions and the cache directory; ``diff`` runs the
differential scripts; ``scenarios`` compares scenario goldens on the simulator and on the real
Job controller and kube-scheduler (:mod:`.sequences`); ``clientsuites`` runs the Python
clients' live tests on the emulator and the real server (:mod:`.clientsuites`; exit 1 when a
test passes on the real server and not on the emulator).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import build, plane


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cre.testing.controlplane")
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build the binaries into the cache unless current")
    b.add_argument("--jobs", type=int, default=2, help="parallel Go compilations (default 2)")
    b.add_argument("--kwok", action="store_true", help="also build KWOK (tools/controlplane/kwok)")
    b.add_argument("--kwok-only", action="store_true", help="build KWOK alone")
    b.add_argument("--workloads", action="store_true",
                   help="also the JobSet and Trainer controller managers (workload_build)")
    up = sub.add_parser("up", help="start a detached control plane")
    up.add_argument("--dir", type=Path, required=True, help="scratch folder for the plane")
    up.add_argument("--controller-manager", action="store_true")
    up.add_argument("--scheduler", action="store_true")
    up.add_argument("--kwok", action="store_true",
                    help="KWOK for the nodes labelled type=kwok (cre.testing.controlplane.kwok)")
    up.add_argument("--crds", type=Path, action="append",
                    help="CRD file or folder (repeatable; default: upstream + deploy/crds)")
    up.add_argument("--workloads", action="store_true",
                    help="also the real JobSet and Trainer controllers with their webhooks "
                    "(default CRDs: their pinned versions + deploy/crds)")
    down = sub.add_parser("down", help="stop the control plane recorded in --dir")
    down.add_argument("--dir", type=Path, required=True)
    sub.add_parser("info", help="pinned versions and cache directory")
    d = sub.add_parser("diff", help="run the differential scripts on the emulator and a real "
                       "control plane and print the table")
    d.add_argument("--only", action="append", help="script name (repeatable)")
    d.add_argument("--details", action="store_true", help="print every difference")
    cs = sub.add_parser("clientsuites", help="run the official Python client's and "
                        "kubernetes_asyncio's live tests (from their PyPI source distributions) "
                        "on the emulator and a real control plane and compare")
    cs.add_argument("--only", action="append", help="suite name (repeatable): "
                    "kubernetes, kubernetes_asyncio")
    sc = sub.add_parser("scenarios", help="run scenario goldens with the simulator and with the "
                        "real Job controller + kube-scheduler, compare what CRE observes")
    sc.add_argument("--only", action="append", help="scenario name (repeatable; default: "
                    "every scenario under integration/cases/scenario)")
    sc.add_argument("--details", action="store_true", help="print every difference")
    sc.add_argument("--workloads", action="store_true",
                    help="run B with the real JobSet and Trainer too (the simulator plays only "
                    "the node lifecycle and the kubelets)")
    args = parser.parse_args(argv)
    try:
        if args.command == "build":
            if not args.kwok_only:
                report = build.ensure_built(jobs=args.jobs, log=True)
                print(json.dumps({"bin": str(report.binaries.bin_dir), "built": report.built,
                                  "seconds": round(report.seconds, 1),
                                  "bin_mb": round(report.bin_bytes / 2**20, 1)}))
            if args.kwok or args.kwok_only:
                kwok = build.ensure_kwok_built(jobs=args.jobs, log=True)
                print(json.dumps({"kwok": str(kwok.kwok.path), "version": kwok.kwok.version,
                                  "built": kwok.built, "seconds": round(kwok.seconds, 1),
                                  "bin_mb": round(kwok.bin_bytes / 2**20, 1)}))
            if args.workloads:
                from . import workload_build

                built = workload_build.ensure_built(jobs=args.jobs, log=True)
                print(json.dumps({"bin": str(built.binaries.bin_dir), "built": built.built,
                                  "seconds": round(built.seconds, 1),
                                  "bin_mb": round(built.bin_bytes / 2**20, 1)}))
        elif args.command == "up":
            crds = args.crds
            if args.workloads and crds is None:
                from cre._vendor.crds import JOBSET_OLDEST, TRAINER_OLDEST

                crds = [JOBSET_OLDEST, TRAINER_OLDEST, plane.CRE_CRDS]
            running = plane.start(workdir=args.dir.resolve(), crds=crds, detach=True,
                                  controller_manager=args.controller_manager,
                                  scheduler=args.scheduler)
            try:
                if args.kwok:
                    from .kwok import start_kwok

                    start_kwok(running, detach=True)
                if args.workloads:
                    from . import workloads

                    workloads.start(running, detach=True)
            except BaseException:
                running.stop()
                raise
            print(json.dumps({"kubeconfig": str(running.kubeconfig), "url": running.url,
                              "pids": dict(zip([c.name for c in running.components],
                                               running.pids(), strict=True))}))
        elif args.command == "down":
            print(json.dumps({"stopped": plane.stop_state(args.dir.resolve())}))
        elif args.command == "diff":
            from .oracle import differential

            print(json.dumps(differential(only=args.only, details=args.details), indent=2))
        elif args.command == "clientsuites":
            from .clientsuites import SUITES, run_suites
            from .oracle import pair

            suites = [s for s in SUITES if not args.only or s.name in args.only]
            with pair() as (emulator, real):
                assert emulator.kubeconfig is not None and real.kubeconfig is not None
                outcomes = run_suites(Path(emulator.kubeconfig), Path(real.kubeconfig),
                                      suites=suites)
            print(json.dumps({o.suite: o.table() for o in outcomes}, indent=2))
            if any(o.regressions for o in outcomes):
                return 1
        elif args.command == "scenarios":
            from .sequences import CASES_DIR, compare_scenarios, table

            names = args.only or sorted(p.name for p in CASES_DIR.iterdir() if p.is_dir())
            if args.workloads:
                from .sequences import workload_plane

                with workload_plane() as running:
                    results = compare_scenarios(running, names, workloads=True)
            else:
                with plane.start() as running:
                    running.start_controller_manager(controllers="garbagecollector,namespace")
                    results = compare_scenarios(running, names)
            print(json.dumps(table(results, details=args.details), indent=2, default=str))
        else:
            pinned = build.versions()
            found = build.locate()
            print(json.dumps({"kubernetes": pinned.kubernetes, "etcd": pinned.etcd,
                              "bin": str(build.cache_root() / pinned.label / "bin"),
                              "built": found is not None, "kwok": build.kwok_version(),
                              "kwok_built": build.locate_kwok() is not None}))
    except build.Unavailable as exc:
        print(f"control plane unavailable: {exc}", file=sys.stderr)
        return 3
    except plane.ControlPlaneError as exc:
        print(f"control plane failed: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
