package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/client"
	"github.com/flxproto/felix/conn"
)

// This file holds the broker client verbs' shared connection flags and
// "felix pub"; sub.go and cache.go hold the others.

func init() {
	register(command{
		name:    "pub",
		usage:   "pub [FLAGS] STREAM [MESSAGE...]",
		summary: "publish messages (arguments, or stdin lines) to a broker stream",
		run:     runPub,
	})
}

// clientFlags are the connection flags shared by pub, sub and cache.
type clientFlags struct {
	addr, cert, serverName, tenant, token, namespace string
	insecure, alpn, jsonOut                          bool
	timeout                                          time.Duration
	stderr                                           io.Writer // warnings (nil: os.Stderr)
	// answering is the broker a redirect sent the latest call to (set by
	// connect; nil: -addr).
	answering *atomic.Pointer[string]
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func (c *clientFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.addr, "addr", envOr("FELIX_ADDR", "127.0.0.1:7447"), "broker UDP address (env FELIX_ADDR)")
	fs.StringVar(&c.cert, "cert", envOr("FELIX_CERT", ""), "PEM certificate to trust, e.g. the broker's -cert-out file (env FELIX_CERT)")
	fs.BoolVar(&c.insecure, "insecure", false, "skip certificate verification (local use only)")
	fs.StringVar(&c.serverName, "server-name", "localhost", "TLS server name")
	fs.StringVar(&c.tenant, "tenant", envOr("FELIX_TENANT", "t1"), "tenant id (env FELIX_TENANT)")
	fs.StringVar(&c.token, "token", envOr("FELIX_TOKEN", "demo-token"), "token (env FELIX_TOKEN)")
	fs.StringVar(&c.namespace, "namespace", envOr("FELIX_NAMESPACE", "default"), "namespace (env FELIX_NAMESPACE)")
	fs.BoolVar(&c.alpn, "alpn", false, "offer the felix/1 ALPN id")
	fs.BoolVar(&c.jsonOut, "json", false, "print JSON lines instead of text")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Second, "timeout for connecting and for each answer")
}

// connConfig is the conn.Config of the flags' credentials and trust
// settings: one connection's TLS, ALPN offer, key log and feature flags.
func (c *clientFlags) connConfig(flags felix.Flags) (conn.Config, error) {
	tc := &tls.Config{ServerName: c.serverName}
	switch {
	case c.insecure:
		tc.InsecureSkipVerify = true
	case c.cert != "":
		pool, err := conn.CertPoolFromFile(c.cert)
		if err != nil {
			return conn.Config{}, fmt.Errorf("-cert: %w", err)
		}
		tc.RootCAs = pool
	}
	kl, err := keyLogWriter(c.stderr)
	if err != nil {
		return conn.Config{}, err
	}
	return conn.Config{TLS: tc, ServerName: c.serverName, OfferALPN: c.alpn,
		TenantID: c.tenant, Token: c.token, Flags: flags, KeyLogWriter: kl}, nil
}

// connect returns a client.Client (the API the README recommends) on the
// one broker -addr names. Discovery is off: the CLI talks to the address
// it was given (a tap or proxy in front of a broker stays in the path),
// following only the redirects brokers send. Retries are off too
// (MaxAttempts -1): each call is one attempt within -timeout whose
// failure is reported with its fix, as a script expects of a command; a
// dial is bounded by -timeout, so a silent address is reported as the
// dial's "no answer within -timeout".
func (c *clientFlags) connect(ctx context.Context, flags felix.Flags) (*client.Client, error) {
	cc, err := c.connConfig(flags)
	if err != nil {
		return nil, err
	}
	answering := new(atomic.Pointer[string])
	c.answering = answering
	cl, err := client.New(client.Config{Seeds: []string{c.addr}, NoDiscovery: true,
		MaxAttempts: -1, DialTimeout: c.timeout, Conn: cc,
		OnNotice: func(n client.Notice) {
			if n.Kind == client.NoticeRedirect && n.Target != "" {
				answering.Store(&n.Target)
			}
		}})
	if err != nil {
		return nil, err
	}
	if err := cl.Connect(ctx); err != nil {
		cl.Close()
		if ctx.Err() == nil {
			return nil, c.explain("connect", err)
		}
		return nil, err
	}
	return cl, nil
}

// withClient connects (see connect), runs call and closes the client.
// The client follows a not_leader answer to the broker it names (group,
// commit-state and shard-level reads go to the shard's leader), so these
// verbs work against any node of a cluster; later messages name that
// broker (brokerAddr).
func (c *clientFlags) withClient(ctx context.Context, call func(*client.Client) error) error {
	cl, err := c.connect(ctx, 0)
	if err != nil {
		return err
	}
	defer cl.Close()
	return call(cl)
}

// brokerAddr is the broker the latest call went to: -addr, or the one a
// redirect named.
func (c *clientFlags) brokerAddr() string {
	if c.answering != nil {
		if a := c.answering.Load(); a != nil {
			return *a
		}
	}
	return c.addr
}

// emit prints v as one JSON line (-json) or text as one line.
func (c *clientFlags) emit(w io.Writer, v any, text string) error {
	if c.jsonOut {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	_, err := fmt.Fprintln(w, text)
	return err
}

func runPub(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("pub")
	cf := clientFlags{stderr: stderr}
	cf.register(fs)
	ackName := fs.String("ack", "per_batch", "acknowledgement: none, per_message or per_batch")
	key := fs.String("key", "", "routing key (UTF-8); empty means unkeyed")
	batch := fs.Int("batch", 1, "messages per publish request")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() < 1 {
		return usagef("missing STREAM")
	}
	ack, ok := felix.ParseAckMode(*ackName)
	if !ok {
		return usagef("bad -ack %q", *ackName)
	}
	if *batch < 1 {
		return usagef("-batch must be at least 1")
	}
	stream := fs.Arg(0)
	msgs := fs.Args()[1:]
	if len(msgs) == 0 {
		sc := bufio.NewScanner(stdin)
		sc.Buffer(make([]byte, 64<<10), maxMessageLine)
		for sc.Scan() {
			msgs = append(msgs, sc.Text())
		}
		if err := sc.Err(); err != nil {
			if errors.Is(err, bufio.ErrTooLong) {
				return fmt.Errorf("stdin line %d is longer than the frame limit (%d bytes): one message must fit in one frame with its headers", len(msgs)+1, felix.DefaultMaxFrameBytes)
			}
			return fmt.Errorf("reading stdin: %v", err)
		}
	}
	if err := checkName("STREAM", stream); err != nil {
		return err
	}
	c, err := cf.connect(ctx, 0)
	if err != nil {
		return err
	}
	defer c.Close()
	topic := client.Topic{TenantID: cf.tenant, Namespace: cf.namespace, Stream: stream}
	o := client.PublishOptions{Ack: ack, NoAck: ack == felix.AckNone}
	if *key != "" {
		o.Key = []byte(*key)
	}
	for i := 0; i < len(msgs); i += *batch {
		part := msgs[i:min(i+*batch, len(msgs))]
		payloads := make([][]byte, len(part))
		for j, m := range part {
			payloads[j] = []byte(m)
		}
		pctx, cancel := cf.timeoutCtx(ctx)
		res, err := c.PublishBatch(pctx, topic, payloads, o)
		cancel()
		if err != nil {
			return cf.explain(fmt.Sprintf("publish to %s", stream), err)
		}
		type out struct {
			Stream string  `json:"stream"`
			Count  int     `json:"count"`
			Acked  bool    `json:"acked"`
			Offset *uint64 `json:"offset,omitempty"`
		}
		rec := out{Stream: stream, Count: len(part), Acked: ack != felix.AckNone}
		text := fmt.Sprintf("published %d message(s) to %s/%s", len(part), cf.namespace, stream)
		if res.HasOffset {
			off := res.Offset
			rec.Offset = &off
			text += fmt.Sprintf(" at offset %d", off)
			if len(part) > 1 {
				text += fmt.Sprintf("..%d", off+uint64(len(part))-1)
			}
		} else if ack == felix.AckNone {
			text += " (unacknowledged)"
		}
		if err := cf.emit(stdout, rec, text); err != nil {
			return err
		}
	}
	return nil
}

// maxMessageLine bounds one stdin line of felix pub (the line plus its
// newline): a payload can never be larger than a frame.
const maxMessageLine = felix.DefaultMaxFrameBytes + 1

// maxNameLen is the longest tenant, namespace, stream or cache name: the
// binary publish layout stores names behind a u16 length.
const maxNameLen = 1<<16 - 1

// checkName refuses a name no frame can carry, before connecting.
func checkName(what, name string) error {
	if len(name) > maxNameLen {
		return usagef("%s is %d bytes long; names are limited to %d bytes", what, len(name), maxNameLen)
	}
	if name == "" {
		return usagef("%s is empty", what)
	}
	return nil
}

// printable renders a payload for text output: itself when it is printable
// UTF-8, else a base64 form marked as such.
func printable(b []byte) string {
	s := string(b)
	if !strings.ContainsFunc(s, func(r rune) bool { return r == '\uFFFD' || (r < 0x20 && r != '\t') }) {
		return s
	}
	return "base64:" + b64(b)
}
