#!/bin/sh
# profile.sh WORKLOAD [TRACER ARGS...]: where a traced process spends its time, by perf.
# Starts test/bench/workloads.rb WORKLOAD with the agent ($RUBY, default ruby), attaches
# tracer with the arguments given (none: not attached), samples the process's threads for
# $PROFILE_SECONDS seconds (default 3) and prints the main thread's time by library and by function,
# then the agent's I/O thread's share. perf comes from Debian's linux-perf; for a Ruby in
# another root (make test-rubies' roots), run it there and give SYMFS=root so that perf finds
# the Ruby's symbols. The numbers are shares of samples: compare them between settings.
set -eu
client=
cd "$(dirname "$0")/../.."
workload=$1; shift
ruby=${RUBY:-ruby}
seconds=${PROFILE_SECONDS:-3}
data=$(mktemp /tmp/tracer-profile.XXXXXX)
fifo=$data.out
mkfifo "$fifo"
trap 'kill $target 2>/dev/null || true; rm -f "$data" "$data.old" "$fifo" "$data.trace"' EXIT
$ruby -Ilib -rtracer_agent test/bench/workloads.rb "$workload" >"$fifo" 2>/dev/null &
target=$!
exec 3<"$fifo"
read -r _ pid _ <&3
cat <&3 >/dev/null &
sleep 1 # the agent times calls with the TSC once it has measured its rate against the clock
if [ $# -gt 0 ]; then
	client/tracer -p "$pid" "$@" -o "$data.trace" --duration $((seconds + 2)) 2>/dev/null &
	client=$!
	sleep 1 # attached, and past the first slow rounds
fi
perf record -q -F 1999 -p "$pid" -o "$data" -- sleep "$seconds" >/dev/null 2>&1
symfs=${SYMFS:+--symfs=$SYMFS}
report() {
	perf report -q -i "$data" $symfs --no-children --stdio --percent-limit 0.5 "$@" 2>/dev/null | grep -v '^$' || true
}
echo "== main thread ($pid): its samples by library"
report --tid "$pid" --percentage relative --sort dso
echo "== main thread: by function (1% of its samples and more)"
report --tid "$pid" --percentage relative --sort dso,sym --percent-limit 1 | sed -n '1,30p'
echo "== every thread: samples"
report --sort pid,comm
wait "$client" 2>/dev/null || true
