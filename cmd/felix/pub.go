package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

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
	if err := checkName("-tenant (FELIX_TENANT)", c.tenant); err != nil {
		return nil, err
	}
	if err := checkName("-namespace (FELIX_NAMESPACE)", c.namespace); err != nil {
		return nil, err
	}
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
	batch := fs.Int("batch", 0, "most messages per publish request (0: 1 for MESSAGE arguments; for stdin, every line read\n"+
		"while the previous request was in flight, up to "+strconv.Itoa(stdinBatch)+" lines and "+strconv.Itoa(stdinBatchBytes>>10)+" KiB)")
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
	if *batch < 0 {
		return usagef("-batch must not be negative")
	}
	stream := fs.Arg(0)
	if err := checkName("STREAM", stream); err != nil {
		return err
	}
	p := &publisher{cf: &cf, stream: stream, stdout: stdout, ack: ack,
		topic: client.Topic{TenantID: cf.tenant, Namespace: cf.namespace, Stream: stream},
		o:     client.PublishOptions{Ack: ack, NoAck: ack == felix.AckNone}}
	if *key != "" {
		p.o.Key = []byte(*key)
	}
	c, err := cf.connect(ctx, 0)
	if err != nil {
		return err
	}
	defer c.Close()
	p.c = c
	if msgs := fs.Args()[1:]; len(msgs) > 0 {
		n := max(*batch, 1)
		for i := 0; i < len(msgs); i += n {
			part := msgs[i:min(i+n, len(msgs))]
			payloads := make([][]byte, len(part))
			for j, m := range part {
				payloads[j] = []byte(m)
			}
			if err := p.publish(ctx, payloads); err != nil {
				return err
			}
		}
		return nil
	}
	maxLines := *batch
	if maxLines == 0 {
		maxLines = stdinBatch
	}
	return p.fromStdin(ctx, stdin, maxLines)
}

// stdinBatch and stdinBatchBytes bound a batch of stdin lines (a single
// longer line goes alone, up to the frame limit).
const (
	stdinBatch      = 1000
	stdinBatchBytes = 256 << 10
)

// publisher publishes felix pub's messages and prints one line per batch.
type publisher struct {
	cf     *clientFlags
	c      *client.Client
	stream string
	topic  client.Topic
	o      client.PublishOptions
	ack    felix.AckMode
	stdout io.Writer
	// total counts the messages published.
	total int
}

// fromStdin publishes stdin's lines as they arrive: a line is published as
// soon as it is read, and the lines read while a publish is in flight go
// together in the next one (up to maxLines and stdinBatchBytes). An
// interrupt (ctx) stops the reading: the lines already read are
// published, and the command ends as interrupted with the count. A
// publish in progress is never cut by the interrupt: it ends with its
// answer or its -timeout.
func (p *publisher) fromStdin(ctx context.Context, stdin io.Reader, maxLines int) error {
	chunks := make(chan [][]byte, 16)
	readErr := make(chan error, 1)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		readErr <- readLines(stdin, maxLines, chunks, stop)
		close(chunks)
	}()
	// Publishes outlive the interrupt: what was read is published.
	pctx := context.WithoutCancel(ctx)
	var pending [][]byte
	eof := false
	for {
		if len(pending) == 0 && !eof {
			select {
			case ch, ok := <-chunks:
				if !ok {
					eof = true
				}
				pending = ch
			case <-ctx.Done():
			}
		}
		interrupted := ctx.Err() != nil
		// Everything already read joins the batch, without waiting.
	more:
		for !eof && len(pending) < maxLines {
			select {
			case ch, ok := <-chunks:
				if !ok {
					eof = true
					break more
				}
				pending = append(pending, ch...)
			default:
				break more
			}
		}
		for len(pending) > 0 {
			n := batchLen(pending, maxLines)
			if err := p.publish(pctx, pending[:n]); err != nil {
				return err
			}
			pending = pending[n:]
			if !interrupted {
				break // read what arrived meanwhile before the next batch
			}
		}
		switch {
		case interrupted:
			return interruptedf("published %d message(s) read from stdin until the interrupt", p.total)
		case eof && len(pending) == 0:
			if err := <-readErr; err != nil {
				return err
			}
			return nil
		}
	}
}

// batchLen is how many of lines go in the next publish: up to maxLines and
// stdinBatchBytes, at least one.
func batchLen(lines [][]byte, maxLines int) int {
	n, size := 0, 0
	for n < len(lines) && n < maxLines {
		size += len(lines[n])
		if n > 0 && size > stdinBatchBytes {
			break
		}
		n++
	}
	return n
}

// readLines reads r line by line (a trailing "\r" is dropped, as by
// bufio.ScanLines) and sends the lines to out in chunks: every line that
// is already buffered goes with the one before it (up to maxLines), so a
// line that arrives alone is sent alone, at once. It stops when stop is
// closed.
func readLines(r io.Reader, maxLines int, out chan<- [][]byte, stop <-chan struct{}) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var chunk [][]byte
	n := 0
	send := func() bool {
		if len(chunk) == 0 {
			return true
		}
		select {
		case out <- chunk:
			chunk = nil
			return true
		case <-stop:
			return false
		}
	}
	for {
		line, err := readLine(br)
		if err == nil || (err == io.EOF && line != nil) {
			n++
			chunk = append(chunk, line)
		}
		switch {
		case errors.Is(err, errLineTooLong):
			send()
			return fmt.Errorf("stdin line %d is longer than the frame limit (%d bytes): one message must fit in one frame with its headers", n+1, felix.DefaultMaxFrameBytes)
		case err == io.EOF:
			send()
			return nil
		case err != nil:
			send()
			return fmt.Errorf("reading stdin: %v", err)
		}
		if len(chunk) >= maxLines || br.Buffered() == 0 {
			if !send() {
				return nil
			}
		}
	}
}

var errLineTooLong = errors.New("line too long")

// readLine returns the next line without its "\n" (and "\r"); at the end
// of the input, the last unterminated line with io.EOF (nil when there
// is none).
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		part, err := br.ReadSlice('\n')
		if len(line)+len(part) > maxMessageLine {
			return nil, errLineTooLong
		}
		line = append(line, part...)
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == io.EOF:
			if len(line) == 0 {
				return nil, io.EOF
			}
			return bytes.TrimSuffix(line, []byte("\r")), io.EOF
		case err != nil:
			return nil, err
		}
		line = line[:len(line)-1]
		return bytes.TrimSuffix(line, []byte("\r")), nil
	}
}

// publish publishes one batch and prints its line.
func (p *publisher) publish(ctx context.Context, payloads [][]byte) error {
	cf := p.cf
	pctx, cancel := cf.timeoutCtx(ctx)
	res, err := p.c.PublishBatch(pctx, p.topic, payloads, p.o)
	cancel()
	if err != nil {
		return cf.explain(fmt.Sprintf("publish to %s", p.stream), err)
	}
	p.total += len(payloads)
	type out struct {
		Stream string  `json:"stream"`
		Count  int     `json:"count"`
		Acked  bool    `json:"acked"`
		Offset *uint64 `json:"offset,omitempty"`
	}
	rec := out{Stream: p.stream, Count: len(payloads), Acked: p.ack != felix.AckNone}
	text := fmt.Sprintf("published %d message(s) to %s/%s", len(payloads), cf.namespace, p.stream)
	if res.HasOffset {
		off := res.Offset
		rec.Offset = &off
		text += fmt.Sprintf(" at offset %d", off)
		if len(payloads) > 1 {
			text += fmt.Sprintf("..%d", off+uint64(len(payloads))-1)
		}
	} else if p.ack == felix.AckNone {
		text += " (unacknowledged)"
	}
	return cf.emit(p.stdout, rec, text)
}

// maxMessageLine bounds one stdin line of felix pub (the line plus its
// newline): a payload can never be larger than a frame.
const maxMessageLine = felix.DefaultMaxFrameBytes + 1

// maxNameLen is the longest tenant, namespace, stream or cache name: the
// binary publish layout stores names behind a u16 length.
const maxNameLen = 1<<16 - 1

// checkName refuses a name no frame can carry, before connecting: names
// are UTF-8 text of 1 to 65535 bytes (docs/limits.md, "Names").
func checkName(what, name string) error {
	if len(name) > maxNameLen {
		return usagef("%s is %d bytes long; names are UTF-8 text of 1 to %d bytes", what, len(name), maxNameLen)
	}
	if name == "" {
		return usagef("%s is empty; names are UTF-8 text of 1 to %d bytes", what, maxNameLen)
	}
	if !utf8.ValidString(name) {
		return usagef("%s is not valid UTF-8; names are UTF-8 text of 1 to %d bytes", what, maxNameLen)
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
