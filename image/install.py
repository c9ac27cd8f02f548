"""Build stage of the Containerfile: CRE's virtualenv at /opt/cre, from pinned, hashed wheels.

Run by ``python3`` inside the build base (the image has no shell, so there is no shell script):
a virtualenv; the lock file's exact pins installed offline from the wheels ``make image``
downloaded (``dist/wheels``), with ``--require-hashes`` and binary wheels only (no compiler);
CRE's wheel without dependencies; ``pip check`` that the pins satisfy CRE's requirements; then
pip and setuptools removed (the runtime image gets the virtualenv and no package manager) and
everything compiled to unchecked hash-based bytecode (valid on a read-only root whatever the
files' mtimes).
"""

import os
import subprocess
import sys
from pathlib import Path

VENV = Path("/opt/cre")
SRC = Path(sys.argv[1] if len(sys.argv) > 1 else "/src")


def run(*argv: str) -> None:
    print("+", " ".join(argv), flush=True)
    subprocess.run(argv, check=True, env={**os.environ, "PIP_NO_CACHE_DIR": "1",
                                          "PIP_DISABLE_PIP_VERSION_CHECK": "1",
                                          "PIP_NO_INPUT": "1"})


def main() -> None:
    version = os.environ.get("VERSION", "")
    wheels = sorted(SRC.glob("cre-*.whl"))
    wanted = [w for w in wheels if w.name == f"cre-{version}-py3-none-any.whl"]
    if len(wanted) != 1:
        sys.exit(f"install.py: need cre-{version}-py3-none-any.whl in {SRC} (pass --build-arg "
                 f"VERSION=<cre.__version__>); found: {[w.name for w in wheels]}")
    python = str(VENV / "bin" / "python")
    run(sys.executable, "-m", "venv", str(VENV))
    run(python, "-m", "pip", "install", "--quiet", "--no-index", "--find-links",
        str(SRC / "wheels"), "--require-hashes", "--only-binary", ":all:", "--no-deps",
        "-r", str(SRC / "requirements.lock"))
    run(python, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", str(wanted[0]))
    run(python, "-m", "pip", "check")
    run(python, "-m", "pip", "uninstall", "--quiet", "--yes", "pip", "setuptools")
    # pip's bytecode is timestamp-based, and layer copies need not keep mtimes: the read-only
    # root would then recompile every import on every start. Hash-based, unchecked bytecode is
    # valid whatever the mtimes (nothing edits the image's sources).
    run(python, "-m", "compileall", "-q", "-f", "--invalidation-mode", "unchecked-hash",
        str(VENV / "lib"))


if __name__ == "__main__":
    main()
