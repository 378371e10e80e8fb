#!/usr/bin/env bash
# fuzz.sh [FUZZTIME]: run every fuzz target of the module for FUZZTIME each
# (go test -fuzztime: 2000x, 2000 inputs, by default: a count, not a
# duration, whose deadline can fail a loaded run), from its seeds onwards.
# make check runs it; a crasher lands in the package's testdata/fuzz and
# fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
ft=${1:-2000x}
go=${GO:-go}
fail=0
for pkg in $($go list ./...); do
	dir=$($go list -f '{{.Dir}}' "$pkg")
	ls "$dir"/*_test.go >/dev/null 2>&1 || continue
	fns=$(grep -hoE '^func Fuzz[A-Za-z0-9_]+' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' || true)
	for fn in $fns; do
		echo "fuzz: $pkg $fn (${ft})"
		if ! $go test -run '^$' -fuzz "^${fn}\$" -fuzztime "${ft}" "$pkg" >/tmp/kbox-fuzz.$$ 2>&1; then
			cat /tmp/kbox-fuzz.$$
			fail=1
		fi
	done
done
rm -f /tmp/kbox-fuzz.$$
exit $fail
