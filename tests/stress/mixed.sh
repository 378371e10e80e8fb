# mixed: a long-running mixed workload for the guest (make stress, and 60
# seconds in make check). Run as: sh -c "$(cat mixed.sh)" mixed SECONDS DIR
# Each round forks and execs, writes and checks files from several
# processes and threads, raises signals, runs pipelines and archives, and
# checks every result; the first failure ends the run with status 1.
secs=$1 dir=$2
fail() { echo "mixed FAIL round $round: $*"; exit 1; }
mkdir -p "$dir" || fail "mkdir $dir"
end=$(( $(date +%s) + secs ))
round=0
while [ "$(date +%s)" -lt "$end" ]; do
	round=$((round + 1))
	/opt/tests/forkstorm 20 >/dev/null || fail forkstorm
	/opt/tests/ioconc "$dir/io" 4 50 >/dev/null || fail ioconc
	/opt/tests/threads 4 20 >/dev/null || fail threads
	/opt/tests/sigrace 50 >/dev/null || fail sigrace
	if [ -x /opt/tests/gothreads ]; then
		/opt/tests/gothreads "$dir" 8 10 >"$dir/go.out" 2>&1 || fail "gothreads: $(tail -5 "$dir/go.out")"
	fi
	n=$(sort /etc/passwd | uniq | wc -l)
	[ "$n" -eq "$(wc -l < /etc/passwd)" ] || fail "sort|uniq gave $n lines"
	i=0
	while [ $i -lt 50 ]; do echo "line $i" >> "$dir/append"; i=$((i + 1)); done
	[ "$(wc -l < "$dir/append")" -eq 50 ] || fail "50 appends gave $(wc -l < "$dir/append") lines"
	rm -f "$dir/append"
	tar -cf "$dir/etc.tar" -C / etc 2>/dev/null || fail "tar c"
	mkdir -p "$dir/x" && tar -xf "$dir/etc.tar" -C "$dir/x" || fail "tar x"
	diff -r /etc "$dir/x/etc" >/dev/null || fail "extracted /etc differs"
	rm -rf "$dir/x" "$dir/etc.tar" "$dir/io" "$dir/io.log"
	# kill of a child by pid, and its status
	sleep 5 & p=$!
	kill "$p" && wait "$p"
	[ $? -eq 143 ] || fail "killed sleep's status"
done
echo "mixed ok $round"
