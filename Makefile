# The two set-up commands (see README): `make build` and `make test`.
.PHONY: build test bench fuzz

build:
	scripts/build.sh

test:
	scripts/test.sh

bench:
	scripts/bench.sh

# A longer fuzzing session than the one in `make test` (5 minutes per target).
fuzz:
	FUZZ_SECONDS=300 scripts/fuzz.sh
