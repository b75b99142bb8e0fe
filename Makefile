# The test command of the README and of CI.
GO ?= go

.PHONY: test build vet fmt

test: vet
	$(GO) test -race -count=1 ./...

build:
	$(GO) build -o bin/holdfast ./cmd/holdfast

vet:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "not gofmt-clean:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
