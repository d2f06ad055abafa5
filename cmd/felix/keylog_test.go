package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// SSLKEYLOGFILE: off by default; when set, pub appends the session's TLS
// secrets in NSS key log format and warns on stderr.
func TestKeyLogEnvCLI(t *testing.T) {
	b := startTestBroker(t)
	t.Setenv("SSLKEYLOGFILE", "")
	code, _, errb := felixRun(t, "", cmd([]string{"pub"}, b, "orders", "one")...)
	require.Equal(t, 0, code, errb)
	require.NotContains(t, errb, "SSLKEYLOGFILE")

	file := filepath.Join(t.TempDir(), "keys.log")
	t.Setenv("SSLKEYLOGFILE", file)
	code, _, errb = felixRun(t, "", cmd([]string{"pub"}, b, "orders", "two")...)
	require.Equal(t, 0, code, errb)
	require.Contains(t, errb, "WARNING: SSLKEYLOGFILE is set")
	text, err := os.ReadFile(file)
	require.NoError(t, err)
	for _, label := range []string{"CLIENT_HANDSHAKE_TRAFFIC_SECRET ", "SERVER_HANDSHAKE_TRAFFIC_SECRET ",
		"CLIENT_TRAFFIC_SECRET_0 ", "SERVER_TRAFFIC_SECRET_0 "} {
		require.Equal(t, 1, strings.Count(string(text), label), label)
	}
}
