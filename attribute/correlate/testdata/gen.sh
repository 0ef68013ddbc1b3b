#!/bin/sh
# Regenerates the correlate fixtures (run as root from this directory):
# selftrace logs its own accesses in pinatrace layout while ftrace records
# exceptions:page_fault_user for it in an ftrace instance of our own, which
# is removed afterwards (nobody else's tracing is touched).
#
#   access.tt.log      SEC.USEC: TID: 0xIP: R|W 0xADDR   (selftrace -f tt)
#   access.t.log       SEC.USEC: 0xIP: R|W 0xADDR        (the same run, tid column cut by sed)
#   access.plain.log   0xIP: R|W 0xADDR                  (the same run, pinatrace's own layout)
#   access.tt.log.maps selftrace's /proc/self/maps at the end of the run
#   faults.trace       the instance's trace file (trace_clock mono)
#   faults.tracecmd    trace-cmd report of the same buffer (trace-cmd extract -B)
#   sync.txt           selftrace's "sync N t0 t1" lines (CLOCK_MONOTONIC around trace_marker writes)
#   local.*            a second run with the default trace_clock (local)
#   symfs/tmp/fl_correlate_gen/selftrace  the binary, for --symfs
#
# Tools: gcc (Debian 12.2.0-14) 12.2.0, trace-cmd 3.1.6, kernel as uname -r says.
set -eu
T=/sys/kernel/tracing
B=/tmp/fl_correlate_gen
NPAGES=${NPAGES:-40}
rm -rf "$B" && mkdir -p "$B"
cc -O1 -g -pthread -ffile-prefix-map="$(pwd)"=. -o "$B/selftrace" selftrace.c

run() { # run CLOCK PREFIX
	clock=$1 prefix=$2
	I=$T/instances/fl_correlate_gen_$$
	mkdir "$I"
	trap 'if [ -d "$I" ]; then echo 0 > "$I/tracing_on"; echo 0 > "$I/events/exceptions/page_fault_user/enable"; rmdir "$I"; fi' EXIT
	echo 4096 > "$I/buffer_size_kb"
	echo "$clock" > "$I/trace_clock"
	echo 1 > "$I/options/event-fork"
	rm -f "$B/go"
	"$B/selftrace" -f tt -n "$NPAGES" -m "$I/trace_marker" -g "$B/go" "$B/access.log" > "$B/pid" 2> "$B/sync.txt" &
	while [ ! -s "$B/pid" ]; do sleep 0.01; done
	cat "$B/pid" > "$I/set_event_pid"
	echo 1 > "$I/events/exceptions/page_fault_user/enable"
	echo 1 > "$I/tracing_on"
	touch "$B/go"
	wait
	echo 0 > "$I/tracing_on"
	echo 0 > "$I/events/exceptions/page_fault_user/enable"
	cat "$I/trace" > "${prefix}faults.trace"
	if [ -z "$prefix" ]; then
		# trace-cmd extract removes the instance it extracted (ours).
		(cd "$B" && trace-cmd extract -B "fl_correlate_gen_$$" -o "$B/trace.dat" > /dev/null 2>&1)
		trace-cmd report -i "$B/trace.dat" > faults.tracecmd
	fi
	if [ -d "$I" ]; then rmdir "$I"; fi
	trap - EXIT
	grep '^sync ' "$B/sync.txt" > "${prefix}sync.txt"
	cp "$B/access.log" "${prefix}access.tt.log"
	cp "$B/access.log.maps" "${prefix}access.tt.log.maps"
}

run mono ""
sed -E 's/^([0-9.]+: )[0-9]+: /\1/' access.tt.log > access.t.log
sed -E 's/^[0-9.]+: [0-9]+: //' access.tt.log > access.plain.log
run local local.
mkdir -p symfs/tmp/fl_correlate_gen
cp "$B/selftrace" symfs/tmp/fl_correlate_gen/selftrace
rm -rf "$B"
