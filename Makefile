# Build, test and benchmark the Lambdas. Integration tests need the local
# engines (DynamoDB Local, fauxqs): `make test` installs and starts one pair
# that every test binary shares; see scripts/engines.sh.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
GO ?= go
ENGINES := scripts/engines.sh

.PHONY: deps test bench build fmt vet engines-up engines-down clean run

deps:
	$(ENGINES) install

test: deps vet
	$(ENGINES) run -- $(GO) test -count=1 ./...

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

# go fmt takes packages, so node_modules stays out (go.mod ignores it).
fmt:
	$(GO) fmt ./...

vet:
	$(GO) vet ./...

engines-up: deps
	$(ENGINES) start

engines-down:
	$(ENGINES) stop

clean:
	$(ENGINES) stop
	rm -rf build .engines

# Run the system's main job locally: orders through every real handler on the
# local engines, ending with a summary and the AWS requests per order.
ORDERS ?= 20
run: deps
	$(ENGINES) run -- $(GO) run ./cmd/requestcount -orders $(ORDERS)
