#!/usr/bin/env bash
# fuzz.sh [SECONDS]: run every fuzz target of the module for SECONDS each
# (default 3), from its committed seed corpus (testdata/fuzz) onwards.
# make check runs it; a crasher lands in the package's testdata/fuzz and
# fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-3}
go=${GO:-go}
fail=0
for pkg in $($go list ./...); do
	dir=$($go list -f '{{.Dir}}' "$pkg")
	ls "$dir"/*_test.go >/dev/null 2>&1 || continue
	fns=$(grep -hoE '^func Fuzz[A-Za-z0-9_]+' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' || true)
	for fn in $fns; do
		echo "fuzz: $pkg $fn (${secs}s)"
		if ! $go test -run '^$' -fuzz "^${fn}\$" -fuzztime "${secs}s" "$pkg" >/tmp/kbox-fuzz.$$ 2>&1; then
			cat /tmp/kbox-fuzz.$$
			fail=1
		fi
	done
done
rm -f /tmp/kbox-fuzz.$$
exit $fail
