# The two commands a fresh machine needs: `make test` and `make demo`.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test test-fast demo goldens lint typecheck check venv clean install-check docs image image-tools lock browser promtool soak controlplane controlplane-kwok

venv: $(STAMP)

# The worked examples (examples/*) are installed too: `make test` runs their golden suites.
EXAMPLES := examples/configmap-fanout examples/kopf-tenants

$(STAMP): pyproject.toml $(addsuffix /pyproject.toml,$(EXAMPLES))
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,docs]' $(addprefix -e ,$(EXAMPLES))
	touch $(STAMP)

# The HTML report's browser test drives Debian's chromium through Playwright (never a downloaded
# browser): installed here when missing; where it cannot be, the test skips and names the package.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo "sudo -n" ); \
	  ( $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	    $$SUDO apt-get install -y -qq --no-install-recommends chromium ) >/dev/null 2>&1 \
	  || echo "make: could not apt-get install the Debian package chromium;" \
	          "the HTML report's browser test will be skipped"; }

# deploy/monitoring's rules and dashboard queries are checked with promtool, from Debian's
# `prometheus` package (the daemon is not started): installed here when missing; where it cannot
# be, those checks skip and name the package.
promtool:
	@command -v promtool >/dev/null 2>&1 || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo "sudo -n" ); \
	  ( $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	    $$SUDO apt-get install -y -qq --no-install-recommends prometheus ) >/dev/null 2>&1 \
	  || echo "make: could not apt-get install the Debian package prometheus (promtool);" \
	          "the monitoring rules checks will be skipped"; }

# The real control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler) and KWOK
# (fake nodes and pod lifecycles, a Go module of its own: k8s.io libraries 0.36), built once per
# machine from pinned Go modules (tools/controlplane/) into
# ${XDG_CACHE_HOME:-~/.cache}/cre/controlplane/{<versions>,kwok-<version>}/bin; design record
# docs/design/016. A current build is reused at no cost; KWOK's first build adds ~4 min wall /
# ~2.5 min CPU on this 2-core machine (80 MB binary).
# Without Go or its module proxy this prints what is missing and the tests that need it skip.
# It also builds the real JobSet v0.11.1 and Trainer v2.2.0 controller managers
# (tools/controlplane/workloads/, into .../jobset-v0.11.1-trainer-v2.2.0/bin): first build
# ~4-6 min CPU (6-10 min wall on the shared 2-core machine), relink ~10 s, 82 MB of binaries;
# CRE_CONTROLPLANE_WORKLOADS=0 leaves them out (their tests then skip and say so).
controlplane: $(STAMP)
	@case "$${CRE_CONTROLPLANE:-1}" in 0|no|off|skip) echo 'real control plane switched off (CRE_CONTROLPLANE=0)';; \
	  *) case "$${CRE_CONTROLPLANE_WORKLOADS:-1}" in 0|no|off|skip) W=;; *) W=--workloads;; esac; \
	     $(BIN)/python -m cre.testing.controlplane build --kwok $$W || echo 'real control plane not built: its tests will say why';; esac

# KWOK alone (what `make controlplane` also builds).
controlplane-kwok: $(STAMP)
	$(BIN)/python -m cre.testing.controlplane build --kwok-only

# The whole suite on every core (at most 4) with pytest-xdist; tests that must not run beside
# each other share an xdist_group (conftest.py), which --dist loadgroup keeps on one worker.
# TEST_WORKERS=0 runs it in one process.
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); [ "$$n" -gt 4 ] && n=4; echo $$n)
XDIST = $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadgroup)
# pytest caches its assertion-rewritten modules as bytecode (all of cre: the plugin's package);
# PYTHONDONTWRITEBYTECODE=1 would make every run and every worker recompile them (~5 s each).
PYTEST := env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -q -p no:cacheprovider

test: $(STAMP) image-tools browser promtool controlplane
	$(PYTEST) $(XDIST) $(PYTEST_ARGS)

# The inner loop: the unit tier (pure layers; no emulator, server or process) and the golden
# cases that need none (render, run-render), with the slowest ten printed. No apt, no Go.
test-fast: $(STAMP)
	$(PYTEST) -m unit --durations=10 $(XDIST) tests integration/cases $(PYTEST_ARGS)

goldens: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider integration/cases --update-goldens $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check cre cre_manager tests integration bench image examples conftest.py
	$(BIN)/lint-imports --no-cache

typecheck: $(STAMP)
	$(BIN)/mypy --strict cre cre_manager image

check: test lint typecheck docs

demo: $(STAMP)
	$(BIN)/python -m cre.testing.demo $(if $(SCENARIO),--scenario $(SCENARIO),)

# The documentation site (site/): README, changelog, design records and the API reference from
# the docstrings; strict, so a broken reference or link fails the build (Sphinx roles in
# docstrings too: tools/docs/griffe_sphinx_roles.py). PYTHONPATH: griffe-fieldz imports the
# models, and they must be this checkout's.
docs: $(STAMP)
	PYTHONPATH=$(CURDIR) NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

# `pip install .` without extras in a throw-away venv: the manager and the library work without
# pytest, hypothesis, rich or the test kit's dependencies.
install-check:
	PY=$(PY) .ci/install-check

# The short seeded chaos soak alone (it also runs in `make test`; `python -m bench soak` is the
# long one).
soak: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider integration/e2e/test_e2e_soak.py

clean:
	rm -rf $(VENV)

# The manager's container image (Containerfile; design record docs/design/011): buildah on the
# vfs driver, bases from mmdebstrap cached in ~/.cache/cre-image. Makes cre-manager:<version>
# in buildah's local storage and dist/cre-manager-<version>.oci.tar.
image: $(STAMP)
	$(BIN)/python -m image build

# buildah, mmdebstrap and runc from Debian when missing (as root); `make test` runs it so the
# image test can run, and the test says which package is missing where this cannot install.
# Cheap when all is there: the three commands (image/build.py TOOLS) are looked up first.
image-tools:
	@command -v buildah >/dev/null 2>&1 && command -v mmdebstrap >/dev/null 2>&1 \
	  && command -v runc >/dev/null 2>&1 || $(PY) -m image tools || true

# image/requirements.lock: exact, hashed pins of the base dependencies for the image.
# Regenerate after changing [project.dependencies]; LOCK_ARGS=--upgrade moves every pin.
UV_VERSION ?= 0.13.8
lock: $(STAMP)
	$(BIN)/python -m pip install --quiet 'uv==$(UV_VERSION)'
	$(BIN)/uv pip compile pyproject.toml --universal --python-version 3.11 --generate-hashes \
		--custom-compile-command 'make lock' --quiet $(LOCK_ARGS) -o image/requirements.lock
