# The two set-up commands (see README): `make build` and `make test`.
.PHONY: build test bench bench-ab profile fuzz

build:
	scripts/build.sh

test:
	scripts/test.sh

bench:
	scripts/bench.sh

# Two builds in turns (not a test): REV's (default HEAD~1) against the working tree's.
bench-ab:
	scripts/bench-ab.sh $(REV)

# Where the worker's CPU goes per call (not a test; bench/profile.mjs).
profile:
	scripts/profile.sh

# A longer fuzzing session than the one in `make test` (5 minutes per target).
fuzz:
	FUZZ_SECONDS=300 scripts/fuzz.sh
