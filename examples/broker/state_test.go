package main

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"testing"

	"github.com/flxproto/felix/conn"
	"github.com/stretchr/testify/require"
)

// -state-dir keeps the certificate and key across restarts: created on
// the first start (directory 0700, files 0600), reused on the next, so a
// client that trusts the first start's certificate connects to the
// restarted broker without being re-pointed.
func TestStateDirKeepsTheCertificate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	first := startBroker(t, nil, "-state-dir", dir)
	logs := first.stop(t)
	require.Contains(t, logs, "certificate created")
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
	for _, f := range []string{stateCertFile, stateKeyFile} {
		fi, err := os.Stat(filepath.Join(dir, f))
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), f)
	}

	second := startBroker(t, nil, "-state-dir", dir)
	c, err := conn.Dial(t.Context(), second.addr, &conn.Config{TLS: &tls.Config{RootCAs: first.pool}, TenantID: "t1", Token: "demo-token"})
	require.NoError(t, err, "the first start's certificate is trusted by the restarted broker's clients")
	c.Close()
	require.Contains(t, second.stop(t), "certificate reused")
}

// A state directory with one of the two files, or a key readable by
// others, is refused with what to do.
func TestStateDirRefusesHalfAState(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, stateCertFile), []byte("x"), 0o600))
	err := run([]string{"-addr", "127.0.0.1:0", "-state-dir", dir})
	require.ErrorContains(t, err, "without the other")
	_, _, err = stateCert(filepath.Join(t.TempDir(), "new"))
	require.NoError(t, err)
	open := t.TempDir()
	_, _, err = stateCert(open)
	require.NoError(t, err)
	require.NoError(t, os.Chmod(filepath.Join(open, stateKeyFile), 0o644))
	_, _, err = stateCert(open)
	require.ErrorContains(t, err, "readable by others")
	require.Error(t, run([]string{"-state-dir", dir, "-cert", "c.pem", "-key", "k.pem"}))
}
