package server

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The stats endpoint refuses what a web page can make a browser send (a
// cross-site request, another origin) and names other than localhost as
// Host (DNS rebinding: the page's own name resolving to the broker), and
// answers a scraper by address or localhost.
func TestStatsRefusesForeignRequests(t *testing.T) {
	ss, err := ServeStatsHandler("127.0.0.1:0", JSONHandler(func() any { return map[string]int{"x": 1} }), nil)
	require.NoError(t, err)
	t.Cleanup(func() { ss.Close() })
	addr := ss.Addr().String()
	for _, tc := range []struct {
		name   string
		host   string
		header map[string]string
		want   int
	}{
		{"by address", addr, nil, http.StatusOK},
		{"localhost", "localhost", nil, http.StatusOK},
		{"typed in a browser", addr, map[string]string{"Sec-Fetch-Site": "none"}, http.StatusOK},
		{"same origin", addr, map[string]string{"Origin": "http://" + addr, "Sec-Fetch-Site": "same-origin"}, http.StatusOK},
		{"rebound name", "evil.example:80", nil, http.StatusForbidden},
		{"rebound name without port", "attacker.example", nil, http.StatusForbidden},
		{"cross-site", addr, map[string]string{"Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"same-site", addr, map[string]string{"Sec-Fetch-Site": "same-site"}, http.StatusForbidden},
		{"foreign origin", addr, map[string]string{"Origin": "http://evil.example"}, http.StatusForbidden},
		{"null origin", addr, map[string]string{"Origin": "null"}, http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/stats", nil)
			require.NoError(t, err)
			req.Host = tc.host
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			require.Equal(t, tc.want, resp.StatusCode)
		})
	}
}

// Every HTTP endpoint has the broker's timeouts; an idle keep-alive
// connection is closed by the server (here with a 100 ms idle timeout:
// the test waits for the close, it does not time it).
func TestStatsClosesIdleConnections(t *testing.T) {
	srv := NewHTTPServer(http.NotFoundHandler())
	require.Positive(t, srv.IdleTimeout)
	require.Positive(t, srv.ReadHeaderTimeout)
	require.Positive(t, srv.ReadTimeout)
	require.Positive(t, srv.WriteTimeout)

	old := httpIdleTimeout
	httpIdleTimeout = 100 * time.Millisecond
	t.Cleanup(func() { httpIdleTimeout = old })
	ss, err := ServeStatsHandler("127.0.0.1:0", JSONHandler(func() any { return 1 }), nil)
	require.NoError(t, err)
	t.Cleanup(func() { ss.Close() })
	c, err := net.Dial("tcp", ss.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(30*time.Second)))
	_, err = io.WriteString(c, "GET /stats HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	require.NoError(t, err)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	// Idle from now on: the server ends the connection (EOF), well before
	// the 30 s deadline.
	_, err = br.ReadByte()
	require.ErrorIs(t, err, io.EOF)
}
