package conn

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// lockedBuffer is a bytes.Buffer safe for the concurrent writes of
// several connections.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// keyLogLabels are the NSS key log labels of a TLS 1.3 (QUIC) session.
var keyLogLabels = []string{"CLIENT_HANDSHAKE_TRAFFIC_SECRET", "SERVER_HANDSHAKE_TRAFFIC_SECRET",
	"CLIENT_TRAFFIC_SECRET_0", "SERVER_TRAFFIC_SECRET_0"}

// parseKeyLog checks every line of an NSS key log (LABEL, 32-byte client
// random and secret in hex) and returns the lines by label.
func parseKeyLog(t *testing.T, text string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		require.Len(t, f, 3, "line %q", sc.Text())
		random, err := hex.DecodeString(f[1])
		require.NoError(t, err)
		require.Len(t, random, 32, "client random")
		secret, err := hex.DecodeString(f[2])
		require.NoError(t, err)
		require.Contains(t, []int{32, 48}, len(secret), "a SHA-256 or SHA-384 secret")
		out[f[0]] = append(out[f[0]], sc.Text())
	}
	return out
}

func TestKeyLogWriterBothSides(t *testing.T) {
	leakCheck(t)
	var srvLog, cliLog lockedBuffer
	b := startBroker(t, brokerOpts{offer: fullOffer(), server: func(c *ServerConfig) { c.KeyLogWriter = &srvLog }})
	c := b.dial(t, func(c *Config) { c.KeyLogWriter = &cliLog })
	_, err := c.Publish(testCtx(t), topic, []byte("x"), PublishOptions{Ack: 1})
	require.NoError(t, err)
	require.NoError(t, c.Close())

	cli := parseKeyLog(t, cliLog.String())
	for _, l := range keyLogLabels {
		require.Len(t, cli[l], 1, l)
	}
	require.Len(t, cli, len(keyLogLabels), "no other labels")
	// The server derived the same secrets for the same session.
	srv := parseKeyLog(t, srvLog.String())
	require.Equal(t, cli, srv)
	// One session: every line names the same ClientHello random.
	random := strings.Fields(cli[keyLogLabels[0]][0])[1]
	for _, l := range keyLogLabels {
		require.Equal(t, random, strings.Fields(cli[l][0])[1])
	}
}

func TestKeyLogFromEnv(t *testing.T) {
	t.Setenv(KeyLogEnv, "")
	w, path, err := KeyLogFromEnv()
	require.NoError(t, err)
	require.Nil(t, w, "off by default")
	require.Empty(t, path)

	file := filepath.Join(t.TempDir(), "keys.log")
	t.Setenv(KeyLogEnv, file)
	w, path, err = KeyLogFromEnv()
	require.NoError(t, err)
	require.Equal(t, file, path)
	b := startBroker(t, brokerOpts{offer: fullOffer()})
	c := b.dial(t, func(c *Config) { c.KeyLogWriter = w })
	require.NoError(t, c.Close())
	require.NoError(t, w.Close())
	st, err := os.Stat(file)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	text, err := os.ReadFile(file)
	require.NoError(t, err)
	got := parseKeyLog(t, string(text))
	for _, l := range keyLogLabels {
		require.Len(t, got[l], 1, l)
	}

	t.Setenv(KeyLogEnv, filepath.Join(t.TempDir(), "missing", "keys.log"))
	_, _, err = KeyLogFromEnv()
	require.ErrorContains(t, err, KeyLogEnv)
}

// An existing key log file others may read is refused, its mode named,
// and nothing is appended to it (issue 35: TLS secrets were appended to a
// 0644 file, the warning silent about its mode).
func TestKeyLogFromEnvRefusesSharedFile(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Log("no Unix modes on Windows: nothing checked")
		return
	}
	file := filepath.Join(t.TempDir(), "keys.log")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	require.NoError(t, os.Chmod(file, 0o644))
	t.Setenv(KeyLogEnv, file)
	w, _, err := KeyLogFromEnv()
	require.Nil(t, w)
	require.ErrorContains(t, err, "mode 0644")
	require.ErrorContains(t, err, "refused")
	st, err := os.Stat(file)
	require.NoError(t, err)
	require.Zero(t, st.Size())

	require.NoError(t, os.Chmod(file, 0o600))
	w, _, err = KeyLogFromEnv()
	require.NoError(t, err)
	require.NoError(t, w.Close())
}
