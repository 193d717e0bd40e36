# The two set-up commands (see README): `make build` and `make test`.
.PHONY: build test bench

build:
	scripts/build.sh

test:
	scripts/test.sh

bench:
	scripts/bench.sh
