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

.PHONY: deps test test-app test-infra bench build synth deploy fmt vet engines-up engines-down clean run cost demo chaos recovery load local

deps:
	$(ENGINES) install

# Everything CI checks: the application on the local engines, then the stack.
test: test-app test-infra

test-app: deps vet
	$(ENGINES) run -- $(GO) test -count=1 ./...

# The stack's assertion and cdk-nag tests, then a real synth with the CDK CLI
# and the arm64 binaries.
test-infra: deps
	cd infra && $(INFRA_ENV) $(GO) test -count=1 ./...
	$(MAKE) synth

bench: deps
	$(ENGINES) run -- $(GO) test -run '^$$' -bench . -benchmem ./...

# One arm64 bootstrap per folder in functions/, for provided.al2023.
build:
	shopt -s nullglob; \
	for dir in functions/*/; do \
		name=$$(basename "$$dir"); \
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

# gofmt, go vet and staticcheck on both modules. staticcheck is pinned by
# the tool directive in go.mod: `go tool` builds that version once and
# caches it, so no separate install. The infra module runs the same binary
# (its go.mod has no tool of its own). Checks: staticcheck's defaults.
# Then the API document through two linters pinned in package.json (hence
# deps): Redocly CLI (redocly.yaml, .redocly.lint-ignore.yaml) and
# Spectral's OpenAPI ruleset (.spectral.yaml), each failing on a warning.
vet: deps
	@unformatted=$$(gofmt -l cmd functions shared internal infra); \
		if [[ -n $$unformatted ]]; then echo "not gofmt-ed: $$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) tool staticcheck ./...
	cd infra && $(GO) vet ./...
	staticcheck=$$($(GO) tool -n staticcheck) && cd infra && "$$staticcheck" ./...
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
# `cost usd_per_million=X wru_per_order=Y sfn_standard_usd_per_million=Z`.
cost: deps
	$(ENGINES) run -- $(GO) run ./cmd/cost -orders $(or $(ORDERS),200) $(COST_FLAGS)

# The system doing its job locally: orders through the HTTP API with faults
# switched on, live progress, and a summary; exits non-zero if an order is
# left in flight or an effect happened twice. DEMO_FLAGS adds flags of
# `go run ./cmd/local demo -h`, for example -seed, -transient, -crash.
# VERSIONS=2 runs two workflow versions at once (-versions).
demo: deps
	$(ENGINES) run -- $(GO) run ./cmd/local demo -orders $(or $(ORDERS),300) $(if $(VERSIONS),-versions $(VERSIONS)) $(DEMO_FLAGS)

# The demo with every fault at once (killed invocations between writes,
# duplicate and late messages, zombies, skewed Schedulers and Supervisors,
# engine outages), checking the invariants, on two workflow versions (the
# second with a step that has no undo; VERSIONS=1 for one); SEED=n replays a run.
chaos: deps
	$(ENGINES) run -- $(GO) run ./cmd/local chaos -orders $(or $(ORDERS),300) $(if $(SEED),-seed $(SEED)) $(if $(VERSIONS),-versions $(VERSIONS)) -plain $(CHAOS_FLAGS)

# How soon a step whose Agent died is recovered, in the deployed timing (the
# Supervisor on the stack's schedule), with and without its fast path.
recovery: deps
	$(ENGINES) run -- $(GO) run ./cmd/local recovery -orders $(or $(ORDERS),40) $(RECOVERY_FLAGS)

# The system under load in the deployed timing: finds the capacity, then
# offers 0.5x..3x of it (a table; the last line is the 2x level).
load: deps
	$(ENGINES) run -- $(GO) run ./cmd/local load $(LOAD_FLAGS)

# The same stack, kept running for curl and the AWS CLI (Ctrl-C stops it).
local: deps
	$(ENGINES) run -- $(GO) run ./cmd/local serve $(LOCAL_FLAGS)
