#!/usr/bin/env bash
# test.sh: check the Wireshark dissector tools/wireshark/felix.lua with
# tshark. Run by .ci/run; needs go, tshark and dumpcap (Debian: apt-get
# install -y tshark) and the right to capture on "lo" (root, or dumpcap
# with CAP_NET_RAW). Exits non-zero on any failure.
#
#  1. The JSON schema inside felix.lua is the one of
#     vectors/json/gen/schema.txt (samples and notes left out).
#  2. Every vector under vectors/ (valid and invalid) is dissected with the
#     members or the error class its .json states (wscheck vectors: one
#     frame per packet of exported PDUs handed to the dissector "felix").
#     A deliberately broken copy of the dissector must fail that check.
#     Mutated vectors (wscheck differ; DIFFER_SEED, default 1) must get the
#     error class the Go codec gives them, or the codec's members.
#  3. Stream reassembly (wscheck streams, through the dissector's test entry
#     point felix_stream_test): several frames in one piece, one frame over
#     three pieces, retransmitted and reordered pieces, an unknown flag bit
#     skipped, a bad magic and an oversized length stopping the stream, a
#     stream ending inside a header or a payload.
#  4. A real capture: the demo (examples/demo, no ALPN) and felix pub / sub
#     against the reference broker with ALPN felix/1, each through a felix
#     tap, captured on lo with the tap's TLS key log. Every frame the tap
#     logged must be dissected, on both legs, stream by stream and in order,
#     with the members the tap decoded (wscheck live); the capture must hold
#     frames split over several QUIC packets and packets with several
#     frames. Without the key log the same check must fail.
#
# KEEP=1 keeps the work directory.
set -euo pipefail

fail() { echo "wireshark test: FAIL: $*" >&2; exit 1; }
for tool in go tshark dumpcap; do
	command -v "$tool" >/dev/null || fail "$tool not found (apt-get install -y tshark)"
done
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
lua="$here/felix.lua"
# shellcheck source=../../scripts/capture.sh
. "$repo/scripts/capture.sh"
capture_workdir wireshark-test
tshark --version | head -1

echo "== schema copy in felix.lua"
awk '/^\[schema\]/{on=1; next} on && /^\[/{on=0} on' "$repo/vectors/json/gen/schema.txt" |
	sed -E 's/[[:space:]]+=[[:space:]].*$//' | grep -v -E '^[[:space:]]*(note .*)?$' >"$work/schema.want"
sed -n '/^-- BEGIN SCHEMA$/,/^-- END SCHEMA$/p' "$lua" | sed '1d;$d' >"$work/schema.got"
diff -u "$work/schema.want" "$work/schema.got" >&2 ||
	fail "the schema in felix.lua differs from vectors/json/gen/schema.txt (diff above: copy the [schema] section without samples and notes)"

echo "== building"
(cd "$repo" && go build -o "$work/" ./cmd/felix ./examples/demo ./examples/broker ./tools/wireshark/wscheck)
wscheck="$work/wscheck"

echo "== vectors"
(cd "$repo" && "$wscheck" vectors -lua "$lua" vectors) || fail "vectors"
# control: a dissector that forgets the trailing-bytes rule must be caught
sed 's/fail(ctx, "trailing_bytes", tvb(ctx.pos/ctx.pos = ctx.stop -- (/' "$lua" >"$work/broken.lua"
cmp -s "$lua" "$work/broken.lua" && fail "the control mutation did not apply"
if (cd "$repo" && "$wscheck" vectors -lua "$work/broken.lua" vectors >"$work/broken.out" 2>&1); then
	fail "wscheck vectors passed a dissector without the trailing-bytes check"
fi
grep -q "want trailing_bytes" "$work/broken.out" || fail "the broken dissector failed for another reason: $(tail -5 "$work/broken.out")"

echo "== differential: mutated vectors, the dissector against the Go codec"
(cd "$repo" && "$wscheck" differ -lua "$lua" -n 8 -seed "${DIFFER_SEED:-1}" vectors) || fail "the dissector and the codec disagree"

echo "== stream reassembly"
"$wscheck" streams -lua "$lua" || fail "stream reassembly"

echo "== live capture"
# quic-go's UDP GSO batches are not decrypted by Wireshark 4.0 on the
# sending host's capture: send one packet per datagram
export QUIC_GO_DISABLE_GSO=true
demo_port=$("$wscheck" freeport)
tap_a=$("$wscheck" freeport)
broker_port=$("$wscheck" freeport)
tap_b=$("$wscheck" freeport)
end_port=$("$wscheck" freeport)
capture_start "$work/capture.pcapng" \
	"udp port $demo_port or udp port $tap_a or udp port $broker_port or udp port $tap_b or udp port $end_port"

wait_file() { # FILE WHAT LOG
	for _ in $(seq 200); do [ -s "$1" ] && return 0; sleep 0.05; done
	fail "$2 did not start: $(cat "$3")"
}
keys="$work/keys.log"

# session A: the demo through tap A (no ALPN)
SSLKEYLOGFILE="$keys" "$work/felix" tap -listen "127.0.0.1:$tap_a" -addr-out "$work/tap_a.addr" -cert-out "$work/tap_a.pem" \
	-addr "127.0.0.1:$demo_port" -cert "$work/demo.pem" -o "$work/tap_a.jsonl" 2>"$work/tap_a.err" &
tap_a_pid=$!
pids+=("$tap_a_pid")
wait_file "$work/tap_a.addr" "tap A" "$work/tap_a.err"
"$work/demo" -n 2000 -batch 100 -addr "127.0.0.1:$demo_port" -cert-out "$work/demo.pem" \
	-via "127.0.0.1:$tap_a" -via-cert "$work/tap_a.pem" >"$work/demo.out" 2>&1 || fail "demo: $(tail -20 "$work/demo.out")"

# session B: felix pub / sub with ALPN felix/1 through tap B to the reference broker
"$work/broker" -addr "127.0.0.1:$broker_port" -addr-out "$work/broker.addr" -cert-out "$work/broker.pem" 2>"$work/broker.err" &
pids+=("$!")
wait_file "$work/broker.addr" "the broker" "$work/broker.err"
SSLKEYLOGFILE="$keys" "$work/felix" tap -listen "127.0.0.1:$tap_b" -addr-out "$work/tap_b.addr" -cert-out "$work/tap_b.pem" \
	-addr "127.0.0.1:$broker_port" -cert "$work/broker.pem" -o "$work/tap_b.jsonl" 2>"$work/tap_b.err" &
tap_b_pid=$!
pids+=("$tap_b_pid")
wait_file "$work/tap_b.addr" "tap B" "$work/tap_b.err"
via=(-addr "127.0.0.1:$tap_b" -cert "$work/tap_b.pem" -alpn)
"$work/felix" pub "${via[@]}" -batch 3 wireshark one two three >>"$work/clients.out" 2>&1 || fail "felix pub: $(cat "$work/clients.out")"
"$work/felix" pub "${via[@]}" -ack none wireshark four >>"$work/clients.out" 2>&1 || fail "felix pub -ack none: $(cat "$work/clients.out")"
"$work/felix" pub "${via[@]}" -ack per_message -key k wireshark five >>"$work/clients.out" 2>&1 || fail "felix pub -key: $(cat "$work/clients.out")"
timeout 60 "$work/felix" sub "${via[@]}" -from earliest -n 4 wireshark >>"$work/clients.out" 2>&1 || fail "felix sub: $(cat "$work/clients.out")"

for p in "$tap_a_pid" "$tap_b_pid"; do kill -INT "$p"; wait "$p" || true; done
capture_stop "$end_port"
grep -q "frame(s) logged" "$work/tap_a.err" || fail "tap A did not report its log: $(cat "$work/tap_a.err")"

sessions=(-session "$tap_a,$demo_port,$work/tap_a.jsonl" -session "$tap_b,$broker_port,$work/tap_b.jsonl,alpn")
"$wscheck" live -lua "$lua" -pcap "$work/capture.pcapng" -keylog "$keys" "${sessions[@]}" || fail "live capture"
# control: without the secrets nothing is decrypted, so nothing may match
: >"$work/empty.log"
if "$wscheck" live -lua "$lua" -pcap "$work/capture.pcapng" -keylog "$work/empty.log" "${sessions[@]}" >"$work/nokeys.out" 2>&1; then
	fail "wscheck live passed a capture it could not decrypt"
fi
echo "wireshark test: ok"
