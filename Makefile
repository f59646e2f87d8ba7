# Build, test and benchmark the Lambdas. Integration tests need the local
# engines (DynamoDB Local, fauxqs): `make test` installs and starts one pair
# that every test binary shares; see scripts/engines.sh.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
GO ?= go
ENGINES := scripts/engines.sh

# The CDK app (infra/, its own Go module) talks to the CDK's JavaScript
# core through jsii, which runs on the machine's Node.js; Node 20 still works
# but jsii nags about its end of life on every run.
CDK := JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20 CDK_DISABLE_CLI_TELEMETRY=true npx --no-install cdk
INFRA_ENV := JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20

# The API document's linters (make vet), without their telemetry and update
# notices.
API_DOC := shared/api/openapi.json
REDOCLY := REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true npx --no-install redocly
SPECTRAL := npx --no-install spectral

# One style for every log line (sloglint, in vet): attributes only
# (slog.String("orderId", id), never "orderId", id), which also rules out
# mixing the two in a call; keys in camelCase, as operators' queries and the
# tests read them (orderId, stepIndex, traceId); no global logger, since
# every actor logs through the one in actor.Deps.
SLOGLINT_FLAGS := -attr-only -key-naming-case=camel -no-global=all

.PHONY: screenshots sim sim-ci explore deps test test-app test-infra bench steps build synth deploy fmt vet engines-up engines-down clean run cost demo chaos recovery load local

deps:
	$(ENGINES) install

# Everything CI checks: the application on the local engines, then the stack.
test: test-app test-infra

# RACE_PKGS run under the race detector instead of without it, so no package
# runs twice. They are the packages with goroutines, locks or atomics of
# their own outside their tests (the Agent's breakers and admission, the
# clock, the DynamoDB store, a trace recording and its sending, the engine harness, the local Lambda runtime,
# the log capture, the memory store, the DynamoDB model, and of the local stack the chaos
# faults, the cost run, the remote simulator and the stream bridge, and the
# operators' console (its overview's requests at once, its cached count); the kits
# without tests of their own, storetest and tbrecord, run under it through
# these), and the decision packages and actors over the memory store, whose
# race runs cost about a second each. Left out: internal/localstack itself,
# the end-to-end suite, which takes minutes without the detector and did not
# end within go test's 10-minute limit under it (its parts run under it in
# chaos, costrun, remotesim and streambridge); and the packages without
# concurrency of their own. The race build needs cgo, so a
# C compiler (make deps installs gcc).
# Measured on a shared 2-core machine, with the engines running and the
# build cache warm: `go test -count=1 $(RACE_PKGS)` 176 s, `go test -race
# -count=1 $(RACE_PKGS)` 182 s (the store's and the cost run's tests wait
# on the engines, which -race does not slow); the cold race build of these
# packages, `go test -race -exec /bin/true` with an empty GOCACHE, 123 s.
RACE_PKGS := ./shared/admission ./shared/agent ./shared/clock ./shared/statestore ./shared/trace ./shared/segments \
	./shared/workflow ./shared/followup ./shared/scheduler ./shared/supervisor ./shared/timer \
	./internal/testkit/enginetest ./internal/testkit/lambdart ./internal/testkit/logtest ./internal/testkit/memstore \
	./internal/testkit/ddbmodel \
	./internal/localstack/chaos ./internal/localstack/costrun ./internal/localstack/remotesim ./internal/localstack/streambridge \
	./internal/console

# SAS_BROWSER_REQUIRED: deps installed Chromium, so the console's browser
# test runs instead of skipping (it skips only in a bare `go test` on a
# machine without it).
test-app: deps vet
	SAS_BROWSER_REQUIRED=1 $(ENGINES) run -- bash -euo pipefail -c '\
		race=$$($(GO) list $(RACE_PKGS)); failed=0; \
		$(GO) test -count=1 -timeout 30m $$($(GO) list ./... | grep -vxF "$$race") || failed=1; \
		CGO_ENABLED=1 $(GO) test -race -count=1 $$race || failed=1; \
		exit $$failed'

# The stack's assertion and cdk-nag tests, then a real synth with the CDK CLI
# and the arm64 binaries.
test-infra: deps
	cd infra && $(INFRA_ENV) $(GO) test -count=1 ./...
	$(MAKE) synth

bench: deps
	$(ENGINES) run -- $(GO) test -run '^$$' -bench . -benchmem ./...

# The code steps' generated files: functions/steps/<step>/main.go, each
# one's Lambda, and steps/registry.go (internal/stepgen). A test fails when
# they are stale.
steps:
	$(GO) run ./cmd/stepgen

# One arm64 bootstrap per folder in functions/ and per code step in
# functions/steps/ (build/steps/<step>/bootstrap), for provided.al2023.
build: steps
	shopt -s nullglob; \
	for dir in functions/*/ functions/steps/*/; do \
		name=$${dir#functions/}; name=$${name%/}; \
		if [[ $$name == steps ]]; then continue; fi; \
		echo "build/$$name/bootstrap"; \
		GOOS=linux GOARCH=arm64 CGO_ENABLED=0 $(GO) build -tags lambda.norpc -trimpath -ldflags='-s -w' \
			-o "build/$$name/bootstrap" "./functions/$$name"; \
	done

# Writes cdk.out/ offline: no AWS credentials or account needed.
synth: deps build
	$(CDK) synth --no-notices --quiet
	@echo "cdk.out/SchedulerAgentSupervisor-dev.template.json (sas:stage dev)"

# Builds the binaries, then deploys the stage STAGE (default dev) as the
# stack SchedulerAgentSupervisor-$(STAGE) with the caller's AWS credentials.
# DEPLOY_FLAGS adds flags of cdk deploy, for example the parameters:
# DEPLOY_FLAGS='--parameters ReserveInventoryRemoteBaseUrl=https://...'.
deploy: deps build
	$(CDK) deploy -c sas:stage=$(or $(STAGE),dev) --no-notices $(DEPLOY_FLAGS)

# go fmt takes packages, so node_modules stays out (go.mod ignores it).
fmt:
	$(GO) fmt ./...
	cd infra && $(GO) fmt ./...

# gofmt, go vet, staticcheck and sloglint on both modules. staticcheck and
# sloglint are pinned by the tool directive in go.mod: `go tool` builds that
# version once and caches it, so no separate install. The infra module runs
# the same binaries (its go.mod has no tool of its own). Checks:
# staticcheck's defaults; sloglint's SLOGLINT_FLAGS.
# Then the API document through two linters pinned in package.json (hence
# deps): Redocly CLI (redocly.yaml, .redocly.lint-ignore.yaml) and
# Spectral's OpenAPI ruleset (.spectral.yaml), each failing on a warning.
vet: deps
	@unformatted=$$(gofmt -l cmd functions shared internal infra steps); \
		if [[ -n $$unformatted ]]; then echo "not gofmt-ed: $$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) tool staticcheck ./...
	cd infra && $(GO) vet ./...
	staticcheck=$$($(GO) tool -n staticcheck) && cd infra && "$$staticcheck" ./...
	$(GO) tool sloglint $(SLOGLINT_FLAGS) ./...
	sloglint=$$($(GO) tool -n sloglint) && cd infra && "$$sloglint" $(SLOGLINT_FLAGS) ./...
	$(REDOCLY) lint --format stylish $(API_DOC)
	$(SPECTRAL) lint --fail-severity warn $(API_DOC)

engines-up: deps
	$(ENGINES) start

engines-down:
	$(ENGINES) stop

clean:
	$(ENGINES) stop
	rm -rf build .engines cdk.out

# Orders through every real handler on the local engines, without faults,
# ending with the AWS requests each order costs.
run: deps
	$(ENGINES) run -- $(GO) run ./cmd/requestcount -orders $(or $(ORDERS),20)

# What an order costs: ORDERS orders (default 200) of each scenario through
# the real handlers on the local engines, every AWS request metered (DynamoDB
# capacity as DynamoDB Local reports it), priced at us-east-1 list prices at
# 100 orders/s and at 1M orders/month, beside Step Functions and Lambda
# durable functions. The last line is
# `cost usd_per_million=X wru_per_order=Y sfn_standard_usd_per_million=Z usd_per_million_1m_month=W fixed_usd_per_month=F`.
cost: deps
	$(ENGINES) run -- $(GO) run ./cmd/cost -orders $(or $(ORDERS),200) $(COST_FLAGS)

# The system doing its job locally: orders through the HTTP API with faults
# switched on, live progress, and a summary; exits non-zero if an order is
# left in flight or an effect happened twice. DEMO_FLAGS adds flags of
# `go run ./cmd/local demo -h`, for example -seed, -transient, -crash, and
# -ui, which starts the operators' console on the stack, prints its URL and
# keeps both up after the demo until Ctrl-C.
# VERSIONS=2 runs two workflow versions at once (-versions); WAIT=1 shows
# one order through a step's extended wait instead (-wait).
demo: deps
	$(ENGINES) run -- $(GO) run ./cmd/local demo -orders $(or $(ORDERS),300) $(if $(VERSIONS),-versions $(VERSIONS)) $(if $(WAIT),-wait) $(DEMO_FLAGS)

# The demo with every fault at once (killed invocations between writes,
# duplicate and late messages, zombies, skewed Schedulers and Supervisors,
# engine outages), checking the invariants, on two workflow versions (the
# second with a step that has no undo; VERSIONS=1 for one); SEED=n replays a run.
chaos: deps
	$(ENGINES) run -- $(GO) run ./cmd/local chaos -orders $(or $(ORDERS),300) $(if $(SEED),-seed $(SEED)) $(if $(VERSIONS),-versions $(VERSIONS)) -plain $(CHAOS_FLAGS)

# The deterministic simulation: every actor in one process under simulated
# time, with models of SQS, the stream, SNS and the remotes, faults at every
# port call, each seed its own mix. Its last line is `sim orders=N seeds=S
# violations=V orders_per_cpu_s=R`; a failing seed prints the command that
# replays it. SEED=n starts at another seed; SIM_FLAGS adds flags of
# `go run ./cmd/sim -h`.
sim:
	$(GO) run ./cmd/sim -orders $(or $(ORDERS),1000000) $(if $(SEED),-seed $(SEED)) $(SIM_FLAGS)

# What CI simulates: 100,000 orders, after the test of determinism (same
# seed, same event log) and the exhaustive search of the smallest
# configuration, which run in `make test`.
sim-ci:
	$(GO) run ./cmd/sim -orders $(or $(ORDERS),100000) $(if $(SEED),-seed $(SEED)) $(SIM_FLAGS)

# The exhaustive search of the smallest configuration, with a wider bound
# than `make test`'s (DEVIATIONS choices off the first option per run).
explore:
	$(GO) run ./cmd/sim -explore -deviations $(or $(DEVIATIONS),3)

# How soon a step whose Agent died is recovered, in the deployed timing (the
# Supervisor on the stack's schedule), with and without its fast path.
recovery: deps
	$(ENGINES) run -- $(GO) run ./cmd/local recovery -orders $(or $(ORDERS),40) $(RECOVERY_FLAGS)

# The system under load in the deployed timing: finds the capacity, then
# offers 0.5x..3x of it (a table, and a line of the 2x level), then the
# mixed run of high, normal and low orders (its last line is the high
# class's p99 and shed count at 2x and 3x). LOAD_FLAGS=-mixed-only runs
# the search and the mixed run only.
load: deps
	$(ENGINES) run -- $(GO) run ./cmd/local load $(LOAD_FLAGS)

# The operators' console's screenshots in docs/images (1280x800, and one
# 390 wide), taken by its browser test on the local stack.
screenshots: deps
	mkdir -p docs/images
	SAS_BROWSER_REQUIRED=1 SAS_SCREENSHOTS=$(CURDIR)/docs/images $(ENGINES) run -- \
		$(GO) test -count=1 -v -run '^TestConsoleInABrowser$$' ./internal/console

# The same stack, kept running for curl and the AWS CLI (Ctrl-C stops it).
local: deps
	$(ENGINES) run -- $(GO) run ./cmd/local serve $(LOCAL_FLAGS)
