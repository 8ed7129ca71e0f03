# Two entry points for a fresh machine: `make demo` and `make test`. See README.md.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: install demo test test-unit eval leak-suite bench-authz bench-nav bench-incremental bench-incremental-production bench-index bench-index-scale bench-index-production bench-semantic bench-mcp services-up services-down clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

install: $(VENV)/.installed

# Uses Docker when an engine is running, the no-Docker local stack otherwise.
demo: install
	@if docker info >/dev/null 2>&1; then \
		docker compose up -d --wait && $(BIN)/wayfinder demo --external-services; \
	else \
		$(BIN)/wayfinder demo; \
	fi

# The test session starts (and stops) its own OpenFGA and Neo4j on separate ports.
test: install
	$(BIN)/python -m pytest

test-unit: install
	$(BIN)/python -m pytest tests/unit

# Retrieval quality on the Hive and MuSiQue dev sets: Wayfinder, plain BM25, dense, LightRAG and
# mcp-atlassian side by side, the navigator's exactness, and a scripted agent's calls and tokens
# with Wayfinder's tools and mcp-atlassian's, as alice; reports (JSON, Markdown, plots) in
# .wayfinder/reports/eval-<dataset>-<date>/. Own stack; the first run indexes
# both corpora (2,195 pages), later runs reuse them.
eval: install
	$(BIN)/wayfinder eval

# Recall when a user may see 5%, 1% or 0.3% of a corpus of 21,393 chunks (the Hive space and 17
# copies in 136 spaces): search with the pre-filter, with post-filtering only, and on an index of
# the user's pages alone, side by side; report in .wayfinder/reports/bench-semantic.json. Own
# stack; the first run indexes 5,490 pages (about 100 minutes), later runs reuse them.
bench-semantic: install
	$(BIN)/wayfinder bench-semantic

# 50 MCP clients over HTTP for 60 s, each a user of its own, every answer checked against the leak
# oracle; report in .wayfinder/reports/bench-mcp.json. On the leak suite's stack and index (the
# first of the two to run indexes the Hive space, about 15 minutes).
bench-mcp: install
	$(BIN)/wayfinder bench-mcp

# Every page as every principal over MCP, with canaries; report in .wayfinder/reports/leak-suite.json.
# Own stack and ports; the first run indexes the Hive space (about 15 minutes), later runs reuse it.
leak-suite: install
	$(BIN)/wayfinder leak-suite

# The gate's cost per tool against an allow-all stand-in, side by side on the demo's Hive index.
bench-authz: install
	$(BIN)/wayfinder bench-authz

# The navigator tools on a synthetic company of 170,000 pages and 50,000 issues (own stack; the
# first run loads it into Neo4j and OpenFGA, later runs reuse it): the real gate against allow-all,
# for a user who sees everything and one who sees ~5%; report in .wayfinder/reports/bench-nav.json.
bench-nav: install
	$(BIN)/wayfinder bench-nav

# Full sync of the Hive space over REST, ~1% churn, incremental sync (own stack; about 20 minutes).
bench-incremental: install
	$(BIN)/wayfinder bench-incremental

# The same on the production storage profile (PostgreSQL with pgvector, Neo4j; own stack).
bench-incremental-production: install
	$(BIN)/wayfinder bench-incremental --production

# Index the Hive space from empty stores on a stack of its own: throughput against the floor of
# its models (chunks embedded alone), linearity, server memory and search latency over MCP.
bench-index: install
	$(BIN)/wayfinder bench-index

# The same with the MuSiQue passages as a second, flat space (2,195 pages; about 40 minutes):
# does the last tenth index as fast as the first?
bench-index-scale: install
	$(BIN)/wayfinder bench-index --scale

# bench-index on the production storage profile (PostgreSQL with pgvector, Neo4j; own stack).
bench-index-production: install
	$(BIN)/wayfinder bench-index --production

services-up: install
	$(BIN)/wayfinder services up

services-down: install
	$(BIN)/wayfinder services down

clean: services-down
	rm -rf .wayfinder .wayfinder-test
