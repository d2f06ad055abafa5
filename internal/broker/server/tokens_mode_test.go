package server_test

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix/internal/broker/server"
)

// A tokens file others may read is refused, its mode named, its tokens
// never quoted; the owner-only file loads.
func TestTokensFileModeChecked(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Log("no Unix modes on Windows: nothing checked")
		return
	}
	p := filepath.Join(t.TempDir(), "tokens")
	require.NoError(t, os.WriteFile(p, []byte("t1:mode-secret\n"), 0o600))
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o660} {
		require.NoError(t, os.Chmod(p, mode))
		_, err := server.LoadTokens(p)
		require.ErrorContains(t, err, "mode 0"+octal(mode), "mode %o", mode)
		require.ErrorContains(t, err, "chmod 600")
		require.NotContains(t, err.Error(), "mode-secret")
	}
	require.NoError(t, os.Chmod(p, 0o600))
	toks, err := server.LoadTokens(p)
	require.NoError(t, err)
	require.Contains(t, toks, "mode-secret")
}

func octal(m os.FileMode) string {
	const digits = "01234567"
	p := uint32(m.Perm())
	return string([]byte{digits[p>>6&7], digits[p>>3&7], digits[p&7]})
}
