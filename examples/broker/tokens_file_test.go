package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flxproto/felix/internal/broker/server"
	"github.com/stretchr/testify/require"
)

// A tokens file over its limit, or with a malformed line, stops the broker
// before it listens, naming the problem (and the line), never the token;
// an oversize file whose cut would leave a last entry without its
// permissions is refused whole rather than loaded with every permission.
func TestTokensFileRefusedWhole(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
		return p
	}
	// Padded with comments so that the limit falls inside the last entry,
	// right after "...:reader": a cut there would grant everything.
	last := "t1:cut-secret:reader:subscribe\n"
	pad := server.MaxTokensFileBytes - len("t1:cut-secret:reader")
	var b strings.Builder
	for b.Len() < pad-80 {
		b.WriteString("# " + strings.Repeat("x", 76) + "\n")
	}
	b.WriteString("#" + strings.Repeat("y", pad-b.Len()-2) + "\n")
	require.Equal(t, pad, b.Len())
	over := write("over", b.String()+last)
	_, err := server.LoadTokens(over)
	require.ErrorContains(t, err, "over 16777216 bytes")
	err = run([]string{"-addr", "127.0.0.1:0", "-tokens-file", over})
	require.ErrorContains(t, err, "refused whole")
	require.NotContains(t, err.Error(), "cut-secret")

	// Exactly at the limit: read whole.
	at := write("at", b.String()+"t1:cut-secret:reader")
	toks, err := server.LoadTokens(at)
	require.NoError(t, err)
	require.True(t, toks["cut-secret"].Allows(server.PermAll), "an uncut 3-field entry means all, as documented")

	for _, c := range []struct{ body, want string }{
		{"t1:a\n# fine\nt1:b:bob:subscribe|publsh\n", "line 3: "},
		{"t1:a\n\nt2\n", "line 3: token entry with 1 fields"},
		{"t1:a,t1:b:p:q:r\n", "line 1: token entry with 5 fields"},
		{"t1:dup-secret\nt2:dup-secret\n", "line 2: token entry for tenant \"t2\": token listed twice"},
		{"t1:a:p:\n", "line 1: "},
	} {
		p := write("bad", c.body)
		err := run([]string{"-addr", "127.0.0.1:0", "-tokens-file", p})
		require.ErrorContains(t, err, c.want, c.body)
		require.NotContains(t, err.Error(), "secret", "errors never quote a token")
	}
}
