# mcpsidecar build, test and lint. `make test` is the one command that runs
# every test, on a fresh machine too: it first does its own set-up
# (`make setup`: the Debian packages, the Docker engine, the test image;
# skipped when done), then unit tests (no Docker, no root needed), then the end-to-end
# tests against the real Docker engine (build tag `docker`, in e2e/), then
# the Kubernetes backend's tests on the test cluster (`make kube`: root;
# the cluster's first build takes 10 to 30 minutes).
GO        ?= go
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -X github.com/mcpsidecar/mcpsidecar/internal/version.Version=$(VERSION)
# The host binary is stamped with the SHA-256 of the role binaries built
# with it (internal/version.RoleBinaries): it uses only those
# (internal/rolebin).
ROLESTAMP  = -X 'github.com/mcpsidecar/mcpsidecar/internal/version.RoleBinaries=$(1)'
BIN       := bin/mcpsidecar
# The slim Linux role binary that goes into the image (cmd/mcpsidecar-role):
# built beside the host binary on Linux.
ROLEBIN   := bin/mcpsidecar-role
# The test binary: the product plus the hidden commands the harness's own
# e2e tests drive (x-sleep, harden-selftest, --x-workload-cmd,
# --x-gateway-cmd), behind the build tag testcommands.
TESTBIN   := bin/mcpsidecar-test
FUZZTIME  ?= 20s
# Pinned tools run through the module proxy: `make lint` works on a fresh
# machine with nothing installed but Go.
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2
export CGO_ENABLED := 0

# SETUP=0 skips the set-up (a machine where it is known done).
SETUP ?= 1

.PHONY: setup soak build testbin test unit race e2e kube fuzz lint tidy-check bench clean cross wine-unit dist

build:
	@if [ "$$($(GO) env GOOS)" = linux ]; then set -ex; \
	  $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(ROLEBIN) ./cmd/mcpsidecar-role; \
	  sum=$$(sha256sum $(ROLEBIN) | cut -c1-64); \
	  $(GO) build -trimpath -ldflags "$(LDFLAGS) $(call ROLESTAMP,$$sum)" -o $(BIN) ./cmd/mcpsidecar; \
	else set -x; $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/mcpsidecar; fi

test: setup unit wine-unit fuzz e2e kube

setup:
	@if [ "$(SETUP)" = 1 ]; then scripts/setup.sh; fi

unit:
	$(GO) test -count=1 ./...

# The unit tests under the race detector (needs cgo and a C compiler; the
# product itself stays CGO_ENABLED=0).
race:
	CGO_ENABLED=1 $(GO) test -race -count=1 ./...

testbin:
	$(GO) build -trimpath -tags testcommands -ldflags '$(LDFLAGS)' -o $(TESTBIN) ./cmd/mcpsidecar

# The e2e tests run the test binary; its commands' own unit tests run first.
e2e: build testbin
	$(GO) test -count=1 -tags testcommands ./internal/cli/
	MCPSIDECAR_BIN=$(CURDIR)/$(TESTBIN) $(GO) test -count=1 -tags docker -timeout 75m ./e2e/...

# The Kubernetes backend on the test cluster (scripts/test-kube.sh: builds
# it once per machine, brings it up and down unless one is up already).
kube: build testbin
	MCPSIDECAR_BIN=$(CURDIR)/$(TESTBIN) scripts/test-kube.sh

# Bounded fuzz runs: the spec compiler for a time, the other parsers of
# untrusted input for a fixed number of inputs (count-based runs do not
# stall on a loaded machine).
FUZZCOUNT ?= 5000x
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzLoadResolve$$' -fuzztime $(FUZZTIME) ./internal/spec/
	$(GO) test -run '^$$' -fuzz '^FuzzNormalizeHost$$' -fuzztime $(FUZZCOUNT) ./internal/netpolicy/
	$(GO) test -run '^$$' -fuzz '^FuzzAuthorize$$' -fuzztime $(FUZZCOUNT) ./internal/egress/
	$(GO) test -run '^$$' -fuzz '^FuzzCredentialListener$$' -fuzztime $(FUZZCOUNT) ./internal/egress/
	$(GO) test -run '^$$' -fuzz '^FuzzRecorderFraming$$' -fuzztime $(FUZZCOUNT) ./internal/egress/
	$(GO) test -run '^$$' -fuzz '^FuzzParsePolicy$$' -fuzztime $(FUZZCOUNT) ./internal/harden/
	$(GO) test -run '^$$' -fuzz '^FuzzBuild$$' -fuzztime $(FUZZCOUNT) ./internal/timeline/

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags docker,testcommands ./...
	$(GO) vet -tags kube ./...
	$(GO) vet -tags docker,kube ./...
	GOOS=windows $(GO) vet ./...
	GOOS=darwin $(GO) vet ./...
	$(MAKE) --no-print-directory cross
	$(STATICCHECK) ./...
	$(STATICCHECK) -tags docker,testcommands ./...
	$(STATICCHECK) -tags docker,kube ./...

# The release targets: the host binary builds for each (issue 31). The
# sandbox's containers are Linux whatever the host runs.
TARGETS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64
cross:
	@for t in $(TARGETS); do echo "go build $$t"; GOOS=$${t%/*} GOARCH=$${t#*/} $(GO) build -trimpath -o /dev/null ./cmd/mcpsidecar || exit 1; done
	@for a in amd64 arm64; do echo "go build linux/$$a role"; GOOS=linux GOARCH=$$a $(GO) build -trimpath -o /dev/null ./cmd/mcpsidecar-role || exit 1; done

# The host packages' unit tests compiled for Windows and run under wine
# (scripts/wine-exec.sh makes its prefix and the ProcessPrng shim once).
# Role packages (agent, sidecar, egress, probe, harden, launcher) are
# Linux-only code and not run here. WINE_PACKAGES are the packages that
# pass under Debian 12's wine 8.0; the other host packages
# (WINE_PENDING) fail there today, mostly because wine 8.0 cannot delete
# a file the way Go 1.26's os.RemoveAll does on Windows ("unlinkat ...:
# Invalid function"), and the spec's golden error messages name paths
# with '/' (docs/platforms.md). From internal/runs, the run directory's
# removal (runs rm, runs prune) runs there: it falls back to removing name
# by name where that call is missing (WINE_RUNS).
WINE_PACKAGES ?= ./internal/termtext/ ./internal/redact/ ./internal/enginever/ ./internal/hostca/
WINE_PENDING := ./internal/runs/ ./internal/spec/ ./internal/spectrust/ ./internal/dockerx/ \
	./internal/orchestrate/ ./internal/timeline/ ./internal/progress/ ./internal/verdict/ \
	./internal/netpolicy/ ./internal/mcppin/ ./internal/cli/
WINE_RUNS := '^TestRemove'
wine-unit:
	GOOS=windows GOARCH=amd64 $(GO) test -count=1 -exec $(CURDIR)/scripts/wine-exec.sh $(WINE_PACKAGES)
	GOOS=windows GOARCH=amd64 $(GO) test -count=1 -exec $(CURDIR)/scripts/wine-exec.sh -run $(WINE_RUNS) ./internal/runs/

# Release archives in dist/: one per target (tar.gz, zip for Windows)
# holding the host binary with the version stamped, and SHA256SUMS.
# Each archive also carries the slim Linux role binaries for the engine's
# containers (cmd/mcpsidecar-role), linux-amd64/mcpsidecar-role and
# linux-arm64/mcpsidecar-role, beside the host binary: the host binary
# picks the one of the engine's architecture and checks it is its own
# build (internal/rolebin). A Linux archive carries its own machine's too:
# the image then gets the role binary, not the whole host binary.
dist:
	rm -rf dist && mkdir -p dist/.roles
	@set -e; for a in amd64 arm64; do mkdir -p dist/.roles/linux-$$a; \
	  GOOS=linux GOARCH=$$a $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o dist/.roles/linux-$$a/mcpsidecar-role ./cmd/mcpsidecar-role; done
	@set -e; sums="$$(sha256sum dist/.roles/linux-*/mcpsidecar-role | cut -c1-64 | tr '\n' ' ' | sed 's/ $$//')"; \
	  for t in $(TARGETS); do os=$${t%/*}; arch=$${t#*/}; ext=; [ $$os = windows ] && ext=.exe; \
	  d=dist/mcpsidecar-$(VERSION)-$$os-$$arch; mkdir -p $$d; \
	  GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags "$(LDFLAGS) $(call ROLESTAMP,$$sums)" -o $$d/mcpsidecar$$ext ./cmd/mcpsidecar; \
	  cp -r LICENSE README.md docs $$d/; \
	  cp -r dist/.roles/linux-amd64 dist/.roles/linux-arm64 $$d/; \
	  if [ $$os = windows ]; then (cd dist && zip -qr $${d#dist/}.zip $${d#dist/}); else tar -C dist -czf $$d.tar.gz $${d#dist/}; fi; \
	  rm -rf $$d; done
	rm -rf dist/.roles
	cd dist && sha256sum *.tar.gz *.zip > SHA256SUMS

# go.mod and go.sum say exactly what the code imports.
tidy-check:
	$(GO) mod tidy -diff

# The record's soak test (issue 26) at 1,000 requests per gateway path:
# lines missing and duplicated per path, on loopback only.
soak:
	MCPSIDECAR_SOAK_REQUESTS=1000 $(GO) test -count=1 -run '^TestRecordSoak$$' -v ./internal/egress/

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

clean:
	rm -rf bin
