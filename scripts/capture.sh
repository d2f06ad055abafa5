# capture.sh: capturing Felix traffic on loopback, sourced by
# scripts/keylog-check.sh and tools/wireshark/test.sh (bash).
#
#   capture_workdir NAME     $work: a fresh temporary directory, removed on
#                            exit unless KEEP is set; every pid added to
#                            the array pids is killed on exit
#   capture_start FILE BPF   dumpcap on lo into FILE, returns once it captures
#   capture_stop PORT        stops dumpcap once everything sent so far is in
#                            FILE: PORT (UDP, matched by BPF, nobody
#                            listening) receives a marker datagram, and
#                            dumpcap is stopped when the marker is in the file
#                            (on SIGINT dumpcap does not drain what the
#                            kernel still holds)
# Needs dumpcap and tshark (Debian: apt-get install -y tshark).

capture_fail() {
	echo "$capture_name: FAIL: $*" >&2
	exit 1
}

capture_workdir() {
	capture_name=$1
	work=$(mktemp -d "${TMPDIR:-/tmp}/felix-$capture_name.XXXXXX")
	pids=()
	trap capture_cleanup EXIT
}

capture_cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	if [ -n "${KEEP:-}" ]; then echo "$capture_name: files kept in $work"; else rm -rf "$work"; fi
}

capture_start() {
	capture_file=$1
	dumpcap -q -i lo -f "$2" -w "$capture_file" 2>"$capture_file.err" &
	dumpcap_pid=$!
	pids+=("$dumpcap_pid")
	for _ in $(seq 100); do
		grep -q "Capturing on" "$capture_file.err" 2>/dev/null && return 0
		kill -0 "$dumpcap_pid" 2>/dev/null || capture_fail "dumpcap exited: $(cat "$capture_file.err")"
		sleep 0.1
	done
	capture_fail "dumpcap did not start capturing: $(cat "$capture_file.err")"
}

capture_stop() {
	local marker="felix-capture-end-$$"
	printf '%s' "$marker" >"/dev/udp/127.0.0.1/$1"
	for _ in $(seq 100); do
		tshark -n -r "$capture_file" -Y "udp contains \"$marker\"" 2>/dev/null | grep -q . && break
		sleep 0.1
	done
	kill -INT "$dumpcap_pid"
	wait "$dumpcap_pid" 2>/dev/null || true
	tshark -n -r "$capture_file" -Y "udp contains \"$marker\"" 2>/dev/null | grep -q . ||
		capture_fail "the end marker sent to port $1 is not in $capture_file"
}
