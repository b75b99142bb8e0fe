# The test command of the README and of CI.
GO ?= go

.PHONY: test build vet fmt fuzz vulncheck

test: vet
	$(GO) test -race -count=1 ./...

build:
	$(GO) build -o bin/holdfast ./cmd/holdfast

vet:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "not gofmt-clean:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...

# A short run of every fuzz target (FUZZTIME=10m for a long one); the seed
# corpora under testdata/ also run with every "make test".
FUZZTIME ?= 10s
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzKeys$$' -fuzztime $(FUZZTIME) .
	$(GO) test -run '^$$' -fuzz '^FuzzOperations$$' -fuzztime $(FUZZTIME) .
	$(GO) test -run '^$$' -fuzz '^FuzzLockJSON$$' -fuzztime $(FUZZTIME) .
	$(GO) test -run '^$$' -fuzz '^FuzzDurationJSON$$' -fuzztime $(FUZZTIME) .
	$(GO) test -run '^$$' -fuzz '^FuzzTimeUnmarshal$$' -fuzztime $(FUZZTIME) .
	$(GO) test -run '^$$' -fuzz '^FuzzTimeJSON$$' -fuzztime $(FUZZTIME) .
	$(GO) test -run '^$$' -fuzz '^FuzzRequestBodies$$' -fuzztime $(FUZZTIME) ./server
	$(GO) test -run '^$$' -fuzz '^FuzzQueries$$' -fuzztime $(FUZZTIME) ./server
	$(GO) test -run '^$$' -fuzz '^FuzzJSONReader$$' -fuzztime $(FUZZTIME) ./server
	$(GO) test -run '^$$' -fuzz '^FuzzJSONWriters$$' -fuzztime $(FUZZTIME) ./server
	$(GO) test -run '^$$' -fuzz '^FuzzEncode$$' -fuzztime $(FUZZTIME) ./client
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeResult$$' -fuzztime $(FUZZTIME) ./client
	$(GO) test -run '^$$' -fuzz '^FuzzReadBatch$$' -fuzztime $(FUZZTIME) ./client

# Known vulnerabilities in the code holdfast calls, from a database built
# offline (scripts/vulncheck says how). Run it with the toolchain that
# builds releases: GOTOOLCHAIN=go1.27.3 make vulncheck.
vulncheck:
	bash scripts/vulncheck
