# The two commands a fresh machine needs: `make test` and `make demo`.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test demo goldens lint typecheck check venv clean install-check docs

venv: $(STAMP)

# The worked examples (examples/*) are installed too: `make test` runs their golden suites.
EXAMPLES := examples/configmap-fanout examples/kopf-tenants

$(STAMP): pyproject.toml $(addsuffix /pyproject.toml,$(EXAMPLES))
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,docs]' $(addprefix -e ,$(EXAMPLES))
	touch $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider $(PYTEST_ARGS)

goldens: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider integration/cases --update-goldens $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check cre cre_manager tests integration bench examples
	$(BIN)/lint-imports --no-cache

typecheck: $(STAMP)
	$(BIN)/mypy --strict cre cre_manager

check: test lint typecheck docs

demo: $(STAMP)
	$(BIN)/python -m cre.testing.demo $(if $(SCENARIO),--scenario $(SCENARIO),)

# The documentation site (site/): README, changelog, design records and the API reference from
# the docstrings; strict, so a broken reference or link fails the build.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

# `pip install .` without extras in a throw-away venv: the manager and the library work without
# pytest, hypothesis, rich or the test kit's dependencies.
install-check:
	PY=$(PY) .ci/install-check

clean:
	rm -rf $(VENV)
