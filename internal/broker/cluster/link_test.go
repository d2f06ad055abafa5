package cluster_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/cluster"
)

// linkClient dials through the interposer with a short idle timeout, so
// that a dead link is noticed quickly.
func linkClient(t testing.TB, c *cluster.Cluster) *conn.Client {
	return dial(t, c, c.Fixture().LinkAddr, func(cfg *conn.Config) {
		cfg.QUIC = &quic.Config{MaxIdleTimeout: time.Second, KeepAlivePeriod: 100 * time.Millisecond}
	})
}

func publish(t testing.TB, cl *conn.Client, tp felix.Topic, p string) (felix.PublishResult, error) {
	return cl.Publish(ctxT(t), tp, []byte(p), conn.PublishOptions{Ack: felix.AckPerMessage})
}

func TestLinkDrop(t *testing.T) {
	c := start(t, cluster.Config{Nodes: 2})
	tp := topic(c, c.Fixture().LinkStream)
	cl := linkClient(t, c)
	_, err := publish(t, cl, tp, "a")
	require.NoError(t, err)
	c.Link().Drop(time.Hour)
	_, err = publish(t, cl, tp, "b")
	require.Error(t, err, "a publish through a dropped link returns an error, it does not hang")
	require.Positive(t, c.Link().Stats().Dropped)
	c.Heal() // ends the drop early
	_, err = publish(t, linkClient(t, c), tp, "c")
	require.NoError(t, err)
}

func TestLinkReset(t *testing.T) {
	c := start(t, cluster.Config{Nodes: 2})
	tp := topic(c, c.Fixture().LinkStream)
	cl := linkClient(t, c)
	_, err := publish(t, cl, tp, "a")
	require.NoError(t, err)
	sub, err := cl.Subscribe(ctxT(t), tp, conn.SubscribeOptions{})
	require.NoError(t, err)
	defer sub.Close()
	c.Link().Reset()
	_, err = publish(t, cl, tp, "b")
	require.Error(t, err, "the old connection is dead for good")
	_, err = sub.Next(ctxT(t))
	require.Error(t, err)
	require.NotErrorIs(t, err, io.EOF, "a reset is never a clean end")
	// A new connection passes at once.
	_, err = publish(t, linkClient(t, c), tp, "c")
	require.NoError(t, err)
	require.Positive(t, c.Link().Stats().DeadDiscarded)
}

func TestLinkStall(t *testing.T) {
	c := start(t, cluster.Config{Nodes: 2})
	f := c.Fixture()
	tp := topic(c, f.LinkStream)
	cl := dial(t, c, f.LinkAddr, nil) // default idle timeout: a stall is ridden out
	sub, err := cl.Subscribe(ctxT(t), tp, conn.SubscribeOptions{})
	require.NoError(t, err)
	defer sub.Close()
	direct := dial(t, c, c.Addr(c.LinkNode()), nil)
	c.Link().Stall(100 * time.Millisecond)
	var first uint64
	for i := range 5 {
		res, err := publish(t, direct, tp, strconv.Itoa(i))
		require.NoError(t, err)
		if i == 0 {
			first = res.Offset
		}
	}
	res, err := publish(t, cl, tp, "through the stall")
	require.NoError(t, err, "slow, not failed")
	require.Equal(t, first+5, res.Offset)
	for i := range 6 {
		ev, err := sub.Next(ctxT(t))
		require.NoError(t, err)
		require.Equal(t, first+uint64(i), ev.Offset, "in order, contiguous")
	}
	require.Positive(t, c.Link().Stats().Stalled)
}

// post sends body as JSON to the control endpoint of c (its base URL
// url, then the path), as a suite does: conformance.Fixture.Control.
func post(t testing.TB, c *cluster.Cluster, url, body string) (int, string) {
	return control(t, c, http.MethodPost, url, body)
}

// getCtl sends a GET to the control endpoint of c as a suite does.
func getCtl(t testing.TB, c *cluster.Cluster, url string) (int, string) {
	return control(t, c, http.MethodGet, url, "")
}

func control(t testing.TB, c *cluster.Cluster, method, url, body string) (int, string) {
	t.Helper()
	f := c.Fixture()
	path, ok := strings.CutPrefix(url, f.ControlURL)
	require.True(t, ok, url)
	code, answer, err := f.Control(ctxT(t), method, path, []byte(body))
	require.NoError(t, err)
	return code, string(answer)
}

// ctlDo sends a request with exactly the headers hdr (a "Host" entry sets
// the Host header) and returns the status and the body.
func ctlDo(t testing.TB, method, url, body string, hdr map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxT(t), method, url, strings.NewReader(body))
	require.NoError(t, err)
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func TestControlEndpoint(t *testing.T) {
	c := start(t, cluster.Config{Nodes: 3, QuorumTimeout: time.Millisecond})
	url, err := c.ServeControl("127.0.0.1:0")
	require.NoError(t, err)
	_, err = c.ServeControl("127.0.0.1:0")
	require.Error(t, err)
	for _, a := range []string{"0.0.0.0:0", ":0", "example.com:80", "nonsense"} {
		_, err = c.ServeControl(a)
		require.ErrorContains(t, err, "address", a)
	}
	require.Equal(t, url, c.Fixture().ControlURL)

	bad := []struct{ path, body string }{
		{"/nope", ""},
		{"/link", "{"},
		{"/link", `{"fault":"flap"}`},
		{"/link", `{}`},
		{"/link", `{"fault":"drop","hold_ms":-1}`},
		{"/link", `{"fault":"drop","extra":1}`},
		{"/fence", `{"stream":"missing"}`},
		{"/partition", `{"stream":"durable"}`},
		{"/kill", `{}`},
		{"/kill", `{"node":7}`},
		{"/restart", `{"node":0}`},
		{"/heal", `[]`},
	}
	for _, b := range bad {
		code, msg := post(t, c, url+b.path, b.body)
		require.True(t, code >= 400 && code < 500, "%s %s: %d", b.path, b.body, code)
		require.Equal(t, 1, strings.Count(msg, "\n"), "one line: %q", msg)
	}
	code, _ := getCtl(t, c, url+"/link")
	require.Equal(t, http.StatusMethodNotAllowed, code)

	// The interposer's counters.
	_, err = publish(t, dial(t, c, c.Fixture().LinkAddr, nil), topic(c, cluster.LinkStream), "counted")
	require.NoError(t, err)
	code, body := getCtl(t, c, url+"/link/stats")
	require.Equal(t, http.StatusOK, code)
	var stats map[string]uint64
	require.NoError(t, json.Unmarshal([]byte(body), &stats))
	require.Equal(t, c.Link().Stats().Sessions, stats["sessions"])
	require.Positive(t, stats["forwarded"])
	require.Contains(t, stats, "stalled")

	f := c.Fixture()
	// fence (default: the movable stream) → publishes refused as moving.
	code, _ = post(t, c, url+"/fence", `{"hold_ms":600000}`)
	require.Equal(t, http.StatusOK, code)
	_, err = publish(t, dial(t, c, f.Addrs[0], nil), topic(c, f.MovableStream), "x")
	var be *felix.BrokerError
	require.ErrorAs(t, err, &be)
	require.Equal(t, felix.CodeShardUnavailable, be.Code)
	code, _ = post(t, c, url+"/fence", "")
	require.Equal(t, http.StatusConflict, code, "already moving")

	// partition / heal.
	code, _ = post(t, c, url+"/partition", "")
	require.Equal(t, http.StatusOK, code)
	_, err = publish(t, dial(t, c, f.Addrs[0], nil), topic(c, f.QuorumStream), "q")
	require.ErrorAs(t, err, &be)
	require.Equal(t, felix.CodeQuorumTimeout, be.Code)
	code, _ = post(t, c, url+"/heal", "{}")
	require.Equal(t, http.StatusOK, code)
	_, err = publish(t, dial(t, c, f.Addrs[0], nil), topic(c, f.QuorumStream), "q")
	require.NoError(t, err)

	// link.
	code, _ = post(t, c, url+"/link", `{"fault":"stall","hold_ms":1}`)
	require.Equal(t, http.StatusOK, code)
	code, _ = post(t, c, url+"/link", `{"fault":"reset"}`)
	require.Equal(t, http.StatusOK, code)

	// kill / restart.
	code, _ = post(t, c, url+"/kill", `{"node":0}`)
	require.Equal(t, http.StatusOK, code)
	require.False(t, c.Alive(0))
	code, _ = post(t, c, url+"/kill", `{"node":0}`)
	require.Equal(t, http.StatusConflict, code)
	code, _ = post(t, c, url+"/restart", `{"node":0}`)
	require.Equal(t, http.StatusOK, code)
	require.True(t, c.Alive(0))
	_, err = publish(t, dial(t, c, c.Addr(0), nil), topic(c, f.DurableStream), "after restart")
	require.NoError(t, err)

	code, body = getCtl(t, c, url+"/fixture")
	require.Equal(t, http.StatusOK, code)
	require.True(t, strings.Contains(body, `"link_addr"`))
}
