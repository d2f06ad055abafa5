#!/usr/bin/env bash
# keylog-check.sh: prove that the TLS key log (SSLKEYLOGFILE) lets a
# standard tool decrypt a captured Felix session. Not part of CI.
#
# Needs: go (to build cmd/felix and examples/broker), tshark and dumpcap
# (Debian: apt-get install -y tshark), and the right to capture on the
# loopback interface (root, or dumpcap with CAP_NET_RAW/CAP_NET_ADMIN).
#
# It starts the reference broker on loopback, captures UDP on "lo" with
# dumpcap, runs `felix pub` and `felix sub` with SSLKEYLOGFILE set, then
# asks tshark to decrypt the capture with the key log and checks that QUIC
# STREAM frames carrying Felix frames (magic "FLX1") and the published
# message are visible; and, as a control, that without the key log they
# are not. Exits non-zero on any failure.
set -euo pipefail

fail() { echo "keylog-check: FAIL: $*" >&2; exit 1; }
for tool in go tshark dumpcap; do
	command -v "$tool" >/dev/null || fail "$tool not found (apt-get install -y tshark; Go from go.dev)"
done
repo=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=capture.sh
. "$repo/scripts/capture.sh"
capture_workdir keylog-check

echo "keylog-check: building felix and the broker"
(cd "$repo" && go build -o "$work/felix" ./cmd/felix && go build -o "$work/broker" ./examples/broker)

echo "keylog-check: capturing UDP on lo"
capture_start "$work/capture.pcapng" udp

"$work/broker" -addr 127.0.0.1:0 -addr-out "$work/addr" -cert-out "$work/broker.pem" 2>"$work/broker.err" &
pids+=("$!")
for _ in $(seq 100); do [ -s "$work/addr" ] && break; sleep 0.05; done
[ -s "$work/addr" ] || fail "the broker did not start: $(cat "$work/broker.err")"
addr=$(cat "$work/addr")
port=${addr##*:}
echo "keylog-check: broker at $addr"

message="keylog-check-$$"
export SSLKEYLOGFILE="$work/keys.log"
"$work/felix" pub -addr "$addr" -cert "$work/broker.pem" demo "$message" 2>"$work/felix.err" || fail "felix pub: $(cat "$work/felix.err")"
"$work/felix" sub -addr "$addr" -cert "$work/broker.pem" -from earliest -n 1 demo >"$work/sub.out" 2>>"$work/felix.err" || fail "felix sub: $(cat "$work/felix.err")"
unset SSLKEYLOGFILE
grep -q "WARNING: SSLKEYLOGFILE is set" "$work/felix.err" || fail "felix did not warn that the key log is on"
grep -q "$message" "$work/sub.out" || fail "felix sub did not read the message back"

capture_stop 9

for label in CLIENT_HANDSHAKE_TRAFFIC_SECRET SERVER_HANDSHAKE_TRAFFIC_SECRET CLIENT_TRAFFIC_SECRET_0 SERVER_TRAFFIC_SECRET_0; do
	n=$(grep -c "^$label " "$work/keys.log" || true)
	[ "$n" -eq 2 ] || fail "key log has $n $label line(s), want 2 (one per felix connection)"
done
echo "keylog-check: key log has the four TLS 1.3 labels for both connections"

packets=$(tshark -r "$work/capture.pcapng" -Y "udp.port == $port" 2>/dev/null | wc -l)
echo "keylog-check: $packets UDP packets captured to or from port $port"
[ "$packets" -gt 0 ] || fail "nothing captured"

fields=(-T fields -e frame.number -e quic.stream.stream_id -e quic.stream_data)
tshark -r "$work/capture.pcapng" -d "udp.port==$port,quic" -Y "udp.port == $port && quic.stream_data" "${fields[@]}" >"$work/plain.txt" 2>/dev/null || true
[ ! -s "$work/plain.txt" ] || fail "STREAM data was visible without the key log"
echo "keylog-check: without the key log: no STREAM frame is readable (as expected)"

tshark -r "$work/capture.pcapng" -o "tls.keylog_file:$work/keys.log" -d "udp.port==$port,quic" \
	-Y "udp.port == $port && quic.stream_data" "${fields[@]}" >"$work/decrypted.txt" 2>"$work/tshark.err" || fail "tshark: $(cat "$work/tshark.err")"
frames=$(wc -l <"$work/decrypted.txt")
flx=$(grep -ci "464c5831" "$work/decrypted.txt" || true)
msg_hex=$(printf '%s' "$message" | od -An -tx1 | tr -d ' \n')
withmsg=$(grep -ci "$msg_hex" "$work/decrypted.txt" || true)
echo "keylog-check: with the key log: $frames packet(s) with STREAM data, $flx carrying FLX1, $withmsg carrying \"$message\""
[ "$flx" -gt 0 ] || fail "no decrypted STREAM frame carries FLX1"
[ "$withmsg" -gt 0 ] || fail "the published message is not in the decrypted STREAM frames"
echo "keylog-check: first decrypted STREAM frames (frame number, stream id, data):"
head -n 4 "$work/decrypted.txt" | cut -c1-160
echo "keylog-check: OK"
