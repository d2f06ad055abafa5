package cluster

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/flxproto/felix/internal/broker/server"
)

// Control endpoint limits.
const (
	maxControlBody = 4 << 10
	maxHoldMs      = 10 * 60 * 1000 // ten minutes
)

// control is the HTTP control endpoint of a cluster.
type control struct {
	srv  *http.Server
	ln   net.Listener
	done chan error
	once sync.Once
}

func (ct *control) close() error {
	var err error
	ct.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		err = ct.srv.Shutdown(ctx)
		if serr := <-ct.done; !errors.Is(serr, http.ErrServerClosed) && err == nil {
			err = serr
		}
	})
	return err
}

// ServeControl starts the control endpoint on addr (a loopback address,
// anything else is refused; port 0 picks one) and returns its base URL,
// which the fixture then names as control_url.
//
// Every request must carry "Authorization: Bearer " + ControlToken() (the
// fixture's control_token; else 401), and is refused with 403 when it
// comes from a web page (an Origin or Sec-Fetch-Site header) or names a
// Host that is not loopback (DNS rebinding). Every POST has a JSON body,
// Content-Type application/json (else 415; a cross-site form cannot send
// one), every member optional:
//
//	POST /fence      {"stream": S, "shard": N, "hold_ms": H}  fence a shard mid-move (default: the movable stream, shard 0, Config.FenceHold)
//	POST /partition  {"stream": S}                            cut the quorum stream's leader off (default: the quorum stream)
//	POST /heal       {}                                       end partitions and link drops/stalls
//	POST /link       {"fault": "drop"|"reset"|"stall", "hold_ms": H}
//	POST /kill       {"node": N}                              kill node N
//	POST /restart    {"node": N}                              restart node N
//
// and three GETs: /fixture (the fixture description), /state (State: the
// nodes, the faults in force, the shard owners) and /link/stats (the
// interposer's datagram counters: forwarded, dropped, stalled, sessions,
// dead_discarded), which lets a suite order a fault after a datagram it
// caused.
//
// Answers are JSON ({"ok":true,...}); bad input gets a 4xx with a
// one-line reason. Close stops it.
func (c *Cluster) ServeControl(addr string) (string, error) {
	if err := checkLoopback(addr); err != nil {
		return "", err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("cluster: control: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/fence", c.post(c.ctlFence))
	mux.HandleFunc("/partition", c.post(c.ctlPartition))
	mux.HandleFunc("/heal", c.post(func(body) (any, int, error) { c.Heal(); return nil, 0, nil }))
	mux.HandleFunc("/link", c.post(c.ctlLink))
	mux.HandleFunc("/kill", c.post(c.ctlNode(c.Kill)))
	mux.HandleFunc("/restart", c.post(c.ctlNode(c.Restart)))
	mux.HandleFunc("/link/stats", get(func() any {
		st := c.link.Stats()
		return map[string]uint64{"forwarded": st.Forwarded, "dropped": st.Dropped,
			"stalled": st.Stalled, "sessions": st.Sessions, "dead_discarded": st.DeadDiscarded}
	}))
	mux.HandleFunc("/fixture", get(func() any { return c.Fixture() }))
	mux.HandleFunc("/state", get(func() any { return c.State() }))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		httpError(w, http.StatusNotFound, "unknown path "+strconv.Quote(r.URL.Path)+
			" (want /fence, /partition, /heal, /link, /kill, /restart, /fixture, /state, /link/stats)")
	})
	ct := &control{srv: server.NewHTTPServer(c.guard(mux)), ln: ln, done: make(chan error, 1)}
	url := "http://" + ln.Addr().String()
	c.mu.Lock()
	if c.closed || c.ctrl != nil {
		c.mu.Unlock()
		ln.Close()
		return "", errors.New("cluster: control endpoint already running or cluster closed")
	}
	c.ctrl, c.ctrlURL = ct, url
	c.mu.Unlock()
	go func() { ct.done <- ct.srv.Serve(ln) }()
	return url, nil
}

// guard admits a request to the control endpoint: not from a web page, to
// a loopback Host, with the bearer token. The checks run before anything
// else, the token last (a refused browser request learns nothing about
// it); the token comparison takes the same time wherever it differs.
func (c *Cluster) guard(next http.Handler) http.Handler {
	want := []byte("Bearer " + c.ctlToken)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := r.Header["Origin"]; ok || r.Header.Get("Sec-Fetch-Site") != "" {
			httpError(w, http.StatusForbidden, "refused: a request from a web page (Origin or Sec-Fetch-Site header); the control endpoint serves no browser")
			return
		}
		if !loopbackHost(r.Host) {
			httpError(w, http.StatusForbidden, "refused: Host "+strconv.Quote(r.Host)+" is not a loopback name (use the control_url of the fixture)")
			return
		}
		auth := r.Header.Get("Authorization")
		if scheme, tok, ok := strings.Cut(auth, " "); ok && strings.EqualFold(scheme, "Bearer") {
			auth = "Bearer " + tok
		}
		if subtle.ConstantTimeCompare([]byte(auth), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="felix cluster control"`)
			httpError(w, http.StatusUnauthorized, "missing or wrong bearer token: send Authorization: Bearer TOKEN, TOKEN being the control_token of the fixture file")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// loopbackHost reports whether a Host header names localhost or a
// loopback address (with or without a port).
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	return isLoopbackName(host)
}

// isLoopbackName reports whether host is localhost or a loopback IP.
func isLoopbackName(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// get wraps a GET handler answering doc() as JSON.
func get(doc func() any) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			httpError(w, http.StatusMethodNotAllowed, "use GET")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(doc())
	}
}

// body is a control request's JSON body; every member is optional.
type body struct {
	Stream *string `json:"stream"`
	Shard  *uint32 `json:"shard"`
	HoldMs *int64  `json:"hold_ms"`
	Fault  *string `json:"fault"`
	Node   *int    `json:"node"`
}

func (b body) hold() (time.Duration, error) {
	if b.HoldMs == nil {
		return 0, nil
	}
	if *b.HoldMs < 0 || *b.HoldMs > maxHoldMs {
		return 0, fmt.Errorf("hold_ms must be within 0..%d", maxHoldMs)
	}
	return time.Duration(*b.HoldMs) * time.Millisecond, nil
}

// post wraps a handler: POST only, Content-Type application/json, a
// bounded JSON body with no unknown members, a JSON answer, errors as a
// 4xx with one line.
func (c *Cluster) post(h func(body) (any, int, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			httpError(w, http.StatusMethodNotAllowed, "use POST")
			return
		}
		if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
			httpError(w, http.StatusUnsupportedMediaType, "the body must be JSON sent as Content-Type: application/json")
			return
		}
		raw, err := io.ReadAll(io.LimitReader(r.Body, maxControlBody+1))
		if err != nil {
			httpError(w, http.StatusBadRequest, "cannot read the body: "+err.Error())
			return
		}
		if len(raw) > maxControlBody {
			httpError(w, http.StatusRequestEntityTooLarge, "body too large")
			return
		}
		var b body
		if len(bytes.TrimSpace(raw)) > 0 {
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&b); err != nil {
				httpError(w, http.StatusBadRequest, "bad JSON body: "+err.Error())
				return
			}
			if dec.More() {
				httpError(w, http.StatusBadRequest, "bad JSON body: trailing data")
				return
			}
		}
		ans, status, err := h(b)
		if err != nil {
			if status == 0 {
				status = http.StatusBadRequest
			}
			httpError(w, status, err.Error())
			return
		}
		out := map[string]any{"ok": true}
		if ans != nil {
			out["result"] = ans
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	}
}

func httpError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, oneLine(msg)+"\n")
}

func oneLine(s string) string {
	b := []byte(s)
	for i, ch := range b {
		if ch == '\n' || ch == '\r' {
			b[i] = ' '
		}
	}
	return string(b)
}

func (c *Cluster) ctlFence(b body) (any, int, error) {
	stream, shard := MovableStream, uint32(0)
	if b.Stream != nil {
		stream = *b.Stream
	}
	if b.Shard != nil {
		shard = *b.Shard
	}
	hold, err := b.hold()
	if err != nil {
		return nil, 0, err
	}
	to, err := c.Fence(stream, shard, hold)
	if err != nil {
		return nil, http.StatusConflict, err
	}
	return map[string]any{"stream": stream, "shard": shard, "to": c.NodeID(to)}, 0, nil
}

func (c *Cluster) ctlPartition(b body) (any, int, error) {
	stream := QuorumStream
	if b.Stream != nil {
		stream = *b.Stream
	}
	leader, err := c.Partition(stream)
	if err != nil {
		return nil, 0, err
	}
	return map[string]any{"leader": c.NodeID(leader)}, 0, nil
}

func (c *Cluster) ctlLink(b body) (any, int, error) {
	if b.Fault == nil {
		return nil, 0, errors.New(`missing "fault" (drop, reset or stall)`)
	}
	hold, err := b.hold()
	if err != nil {
		return nil, 0, err
	}
	if err := c.link.Apply(*b.Fault, hold); err != nil {
		return nil, 0, err
	}
	return nil, 0, nil
}

func (c *Cluster) ctlNode(op func(int) error) func(body) (any, int, error) {
	return func(b body) (any, int, error) {
		if b.Node == nil {
			return nil, 0, errors.New(`missing "node"`)
		}
		if *b.Node < 0 || *b.Node >= c.Nodes() {
			return nil, 0, fmt.Errorf("no node %d (the cluster has %d)", *b.Node, c.Nodes())
		}
		if err := op(*b.Node); err != nil {
			return nil, http.StatusConflict, err
		}
		return nil, 0, nil
	}
}

// checkLoopback refuses a control address that is not on loopback: the
// endpoint kills nodes and cuts links, and speaks plain HTTP (its bearer
// token would cross the network in clear).
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("cluster: control address: %w", err)
	}
	if !isLoopbackName(host) {
		return fmt.Errorf("cluster: control address %q is not a loopback address", addr)
	}
	return nil
}
