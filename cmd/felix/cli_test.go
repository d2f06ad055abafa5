package main

import (
	"bytes"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/engine"
	"github.com/flxproto/felix/internal/broker/server"
	"github.com/stretchr/testify/require"
)

// Every command's -h (and felix help CMD) lists every flag it parses, with
// defaults, and the broker commands list the environment variables.
func TestHelpListsEveryFlag(t *testing.T) {
	cases := []struct {
		args  []string
		flags []string
		env   bool
	}{
		{[]string{"pub", "-h"}, []string{"-addr", "-cert", "-insecure", "-tenant", "-token", "-namespace", "-timeout", "-json", "-ack", "-key", "-batch"}, true},
		{[]string{"sub", "-h"}, []string{"-addr", "-from", "-n", "-shard", "-queue"}, true},
		{[]string{"cache", "-h"}, []string{"cache get", "cache put", "cache del", "cache watch", "-ttl", "-prefix", "-retained", "-from", "-n"}, true},
		{[]string{"cache", "watch", "-h"}, []string{"-prefix", "-retained", "-from", "-n", "-addr"}, true},
		{[]string{"help", "cache", "watch"}, []string{"-prefix", "-retained"}, true},
		{[]string{"decode", "-h"}, []string{"-raw", "-max"}, false},
		{[]string{"help", "decode"}, []string{"-raw", "-max"}, false},
		{[]string{"state", "-h"}, []string{"state get [FLAGS] STREAM ENTITY KEY", "-addr", "-json"}, true},
		{[]string{"state", "get", "-h"}, []string{"state get [FLAGS] STREAM ENTITY KEY", "-addr"}, true},
	}
	for _, c := range cases {
		code, out, errb := felixRun(t, "", c.args...)
		require.Equal(t, 0, code, "%v: %s", c.args, errb)
		require.Contains(t, out, "usage: felix", c.args)
		for _, f := range c.flags {
			require.Contains(t, out, f, "%v lacks %s", c.args, f)
		}
		for _, env := range []string{"FELIX_ADDR", "FELIX_CERT", "FELIX_TENANT", "FELIX_TOKEN"} {
			require.Equal(t, c.env, strings.Contains(out, env), "%v and %s", c.args, env)
		}
	}
	require.Contains(t, func() string { _, out, _ := felixRun(t, "", "pub", "-h"); return out }(), `(default "127.0.0.1:7447")`)
}

// felix help lists every command in aligned columns on one screen (no
// flags); felix help all adds every command's synopsis and flags.
func TestHelpIsAligned(t *testing.T) {
	code, out, _ := felixRun(t, "", "help")
	require.Equal(t, 0, code)
	require.LessOrEqual(t, strings.Count(out, "\n"), 24, "one screen:\n%s", out)
	for n := range commands {
		require.Contains(t, out, "  felix "+n+" ", "the list names %s", n)
	}
	require.NotContains(t, out, "flags:", "flags are under felix help CMD")
	for _, line := range strings.Split(out, "\n") {
		require.LessOrEqual(t, len(line), 120, "line %q", line)
	}
	col := -1
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "  felix ") {
			continue
		}
		i := strings.LastIndex(line, "  ")
		for i > 0 && line[i-1] == ' ' {
			i--
		}
		// The summary starts after the padded usage column.
		j := strings.Index(line[len("  felix "):], "  ") + len("  felix ")
		for j < len(line) && line[j] == ' ' {
			j++
		}
		if col == -1 {
			col = j
		}
		require.Equal(t, col, j, "summary column of %q", line)
	}
	require.Greater(t, col, 0)
	code, all, _ := felixRun(t, "", "help", "all")
	require.Equal(t, 0, code)
	for _, name := range []string{"cache", "conform", "decode", "encode", "pub", "sub"} {
		require.Contains(t, all, "usage: felix "+name)
		require.NotContains(t, out, "usage: felix "+name)
	}
	require.Contains(t, all, "-retained")
}

// Flag-looking arguments after the positional ones are refused with a hint;
// "--" lets data start with "-".
func TestFlagsAfterPositionalRefused(t *testing.T) {
	code, _, errb := felixRun(t, "", "pub", "-insecure", "orders", "-ack", "none", "hi")
	require.Equal(t, 2, code)
	oneErrLine(t, errb)
	require.Contains(t, errb, "flag -ack after the positional arguments")
	code, _, errb = felixRun(t, "", "sub", "orders", "-n", "1")
	require.Equal(t, 2, code)
	require.Contains(t, errb, "flag -n after")
	code, _, errb = felixRun(t, "", "pub", "orders", "-x")
	require.Equal(t, 2, code)
	require.Contains(t, errb, `"--" before data`)

	b := startTestBroker(t)
	code, out, errb := felixRun(t, "", cmd([]string{"pub"}, b, "--", "orders", "-5")...)
	require.Equal(t, 0, code, errb)
	require.Contains(t, out, "published 1 message(s)")
}

// Usage mistakes exit 2 and are never counted as vector results.
func TestConformUsageErrors(t *testing.T) {
	code, out, errb := felixRun(t, "", "conform", filepath.Join(t.TempDir(), "missing"))
	require.Equal(t, 2, code)
	require.Empty(t, out)
	oneErrLine(t, errb)
	require.NotContains(t, errb, "passed")
	code, out, errb = felixRun(t, "", "conform", t.TempDir())
	require.Equal(t, 2, code)
	require.Empty(t, out)
	require.Contains(t, errb, "no vector files")
}

func TestEncodeListsKinds(t *testing.T) {
	code, _, errb := felixRun(t, `{"type":"ok"}`, "encode")
	require.Equal(t, 1, code)
	oneErrLine(t, errb)
	for _, k := range []string{"json_message", "binary_publish_batch", "binary_event_batch"} {
		require.Contains(t, errb, k)
	}
	code, _, errb = felixRun(t, `{"kind":"nope"}`, "encode")
	require.Equal(t, 1, code)
	require.Contains(t, errb, `unknown kind "nope"; kinds: `)
}

func TestDecodeFlagNames(t *testing.T) {
	code, out, _ := felixRun(t, "", "decode", okFrame)
	require.Equal(t, 0, code)
	require.Contains(t, out, `"flag_names": "0x0000(JSON)"`)
	keyed := "464c5831000100410000000d7b2274797065223a226f6b227d"
	code, out, _ = felixRun(t, "", "decode", keyed)
	require.Equal(t, 1, code)
	require.Contains(t, out, `"flags": 65,`)
	require.Contains(t, out, `"flag_names": "0x0041(BINARY_PUBLISH_BATCH|BINARY_PUBLISH_KEYED)"`)
}

// decode -raw describes every frame of a stream and stops at the first bad
// one, showing its header alone instead of echoing the rest of the input.
func TestDecodeRawStopsAtFirstBadFrame(t *testing.T) {
	frame := mustHex(t, okFrame)
	garbage := bytes.Repeat([]byte{0xAB}, 4<<20)
	in := append(append(append([]byte{}, frame...), frame...), garbage...)
	code, out, errb := felixRun(t, string(in), "decode", "-raw")
	require.Equal(t, 1, code)
	oneErrLine(t, errb)
	require.Contains(t, errb, "bad magic")
	require.Equal(t, 3, strings.Count(out, `"name": "decoded"`))
	require.Contains(t, out, `"frame_hex": "abababababababababababab"`)
	require.Less(t, len(out), 4096, "the garbage is not echoed")

	code, out, _ = felixRun(t, string(frame), "decode", "-raw")
	require.Equal(t, 0, code)
	require.Equal(t, 1, strings.Count(out, `"name": "decoded"`))
	code, _, errb = felixRun(t, "", "decode", "-raw")
	require.Equal(t, 1, code)
	require.Contains(t, errb, "empty")
}

// A frame whose header is valid but whose 1 MiB payload does not decode
// is shown by its head: the view does not echo megabytes of hex.
func TestDecodeRawTruncatesABadLargeFrame(t *testing.T) {
	payload := bytes.Repeat([]byte{0xAB}, 1<<20)
	hdr := felix.AppendHeader(nil, felix.Header{Flags: 0, Length: uint32(len(payload))})
	code, out, errb := felixRun(t, string(append(hdr, payload...)), "decode", "-raw")
	require.Equal(t, 1, code)
	oneErrLine(t, errb)
	require.Contains(t, out, `"kind": "invalid"`)
	require.Contains(t, out, `"frame_bytes": 1048588`)
	require.Contains(t, out, `"frame_hex_truncated": true`)
	require.NotContains(t, out, "payload_hex")
	require.Less(t, len(out), 4096, "the payload is not echoed")
}

// Input limits are stated: a stdin line larger than a frame, a name longer
// than a u16 length.
func TestInputLimitsAreStated(t *testing.T) {
	b := startTestBroker(t)
	long := strings.Repeat("a", 16<<20+10) + "\n"
	code, _, errb := felixRun(t, long, cmd([]string{"pub"}, b, "orders")...)
	require.Equal(t, 1, code)
	oneErrLine(t, errb)
	require.Contains(t, errb, "longer than the frame limit (16777216 bytes)")
	require.NotContains(t, errb, "token too long")

	code, _, errb = felixRun(t, "", cmd([]string{"pub"}, b, strings.Repeat("s", 70000), "hi")...)
	require.Equal(t, 2, code)
	require.Contains(t, errb, "STREAM is 70000 bytes long; names are UTF-8 text of 1 to 65535 bytes")
	require.NotContains(t, errb, "frame too large")
}

// Network errors name the address and the likely fix.
func TestNetworkErrorsAreActionable(t *testing.T) {
	// A UDP socket that never answers: nothing listens for QUIC there.
	silent, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	defer silent.Close()
	addr := silent.LocalAddr().String()
	code, _, errb := felixRun(t, "", "pub", "-addr", addr, "-insecure", "-timeout", "300ms", "orders", "hi")
	require.Equal(t, 1, code)
	oneErrLine(t, errb)
	require.Contains(t, errb, "no answer from "+addr+" within 300ms")
	require.Contains(t, errb, "raise -timeout", "a deadline shorter than a handshake is named first")
	require.Contains(t, errb, "go run ./examples/broker")
	code, _, errb = felixRun(t, "", "pub", "-addr", addr, "-insecure", "-timeout", "1s", "orders", "hi")
	require.Equal(t, 1, code)
	oneErrLine(t, errb)
	require.Contains(t, errb, "no answer from "+addr+" within 1s: is a broker listening on that UDP address?")

	// A broker whose certificate the client was not told to trust.
	srv, err := server.Listen(server.Config{Addr: "127.0.0.1:0", Engine: engine.Config{}})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	defer func() { srv.Close(); <-done }()
	code, _, errb = felixRun(t, "", "cache", "get", "-addr", srv.Addr().String(), "c", "k")
	require.Equal(t, 1, code)
	oneErrLine(t, errb)
	require.Contains(t, errb, "the broker at "+srv.Addr().String()+" presented a certificate signed by an authority this client does not trust")
	require.Contains(t, errb, "pass it with -cert FILE")
	require.NotContains(t, errb, "CRYPTO_ERROR", "the library's message, not quic-go's")

	// Another certificate than the broker's.
	_, pool, err := conn.SelfSigned("localhost")
	require.NoError(t, err)
	_ = pool
	other := filepath.Join(t.TempDir(), "other.pem")
	srv2, err := server.Listen(server.Config{Addr: "127.0.0.1:0", Engine: engine.Config{}})
	require.NoError(t, err)
	require.NoError(t, srv2.WriteCertificate(other))
	srv2.Close()
	code, _, errb = felixRun(t, "", "cache", "get", "-addr", srv.Addr().String(), "-cert", other, "c", "k")
	require.Equal(t, 1, code)
	require.Contains(t, errb, "-cert "+other+" does not sign it: pass the PEM that this broker wrote with -cert-out")

	// An address without a port, and refused credentials: the library's
	// message, then the flag that fixes it.
	code, _, errb = felixRun(t, "", "pub", "-addr", "localhost", "-insecure", "orders", "hi")
	require.Equal(t, 1, code)
	oneErrLine(t, errb)
	require.Contains(t, errb, `bad broker address "localhost"`)
	require.Contains(t, errb, "set -addr / FELIX_ADDR")
	code, _, errb = felixRun(t, "", "pub", "-addr", srv.Addr().String(), "-insecure", "-token", "s3cr3t-guess", "orders", "hi")
	require.Equal(t, 1, code)
	oneErrLine(t, errb)
	require.Contains(t, errb, `refused the credentials offered for tenant "t1": check the tenant id and the token`)
	require.Contains(t, errb, "set -tenant and -token")
	require.NotContains(t, errb, "s3cr3t-guess", "the token is never echoed")
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := decodeHex(s)
	require.NoError(t, err)
	return b
}
