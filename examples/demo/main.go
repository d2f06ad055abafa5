// Command demo shows Felix working end to end with no setup:
//
//	go run ./examples/demo
//
// It starts the reference broker in-process on a free loopback port (with a
// fresh self-signed certificate), then over real QUIC: a live subscriber, a
// publisher sending acknowledged batches, a second subscriber replaying the
// stream from the earliest offset, and cache calls (put, get, TTL expiry,
// delete, counter, watch), all through one client.Client configured as
// the README's quick start configures it. It prints what happened and the measured
// throughput, and exits with status 0 only if every check held.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/client"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/engine"
	"github.com/flxproto/felix/internal/broker/server"
	"github.com/quic-go/quic-go"
)

func main() {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	n := fs.Int("n", 50_000, "records to publish")
	batch := fs.Int("batch", 100, "records per acknowledged batch")
	var o options
	fs.StringVar(&o.addr, "addr", "127.0.0.1:0", "UDP address of the in-process broker")
	fs.StringVar(&o.certOut, "cert-out", "", "write the broker's certificate (PEM) to this file, e.g. for felix tap -cert")
	fs.StringVar(&o.via, "via", "", "connect the clients to this address instead of the broker's, e.g. a felix tap in front of -addr")
	fs.StringVar(&o.viaCert, "via-cert", "", "PEM certificate the clients trust at -via (e.g. felix tap -cert-out)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if (o.via == "") != (o.viaCert == "") {
		fmt.Fprintln(os.Stderr, "demo: -via and -via-cert go together")
		os.Exit(2)
	}
	if err := runWith(context.Background(), os.Stdout, *n, *batch, o); err != nil {
		fmt.Fprintln(os.Stderr, "demo: FAILED:", err)
		os.Exit(1)
	}
}

// checker records named checks and reports them as they happen.
type checker struct {
	out    io.Writer
	failed []string
}

func (c *checker) check(ok bool, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	mark := "ok  "
	if !ok {
		mark = "FAIL"
		c.failed = append(c.failed, msg)
	}
	fmt.Fprintf(c.out, "  [%s] %s\n", mark, msg)
}

// options routes the demo through a relay (felix tap): the broker listens
// on addr and writes its certificate to certOut; the clients dial via and
// trust viaCert.
type options struct {
	addr, certOut, via, viaCert string
}

func run(ctx context.Context, out io.Writer, n, batch int) error {
	return runWith(ctx, out, n, batch, options{addr: "127.0.0.1:0"})
}

func runWith(ctx context.Context, out io.Writer, n, batch int, o options) error {
	if n <= 0 || batch <= 0 {
		return errors.New("-n and -batch must be positive")
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	chk := &checker{out: out}
	disconnected := make(chan error, 1)

	srv, err := server.Listen(server.Config{
		Addr:   o.addr,
		Engine: engine.Config{DefaultStream: engine.StreamConfig{Durable: true}, DefaultQueueCapacity: n/batch + 16, MaxQueueCapacity: n/batch + 16},
	})
	if err != nil {
		return err
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve() }()
	stopped := false
	defer func() {
		if !stopped {
			srv.Close()
			<-served
		}
	}()
	fmt.Fprintf(out, "broker: listening on %s (QUIC, self-signed certificate for localhost)\n", srv.Addr())
	if o.certOut != "" {
		if err := srv.WriteCertificate(o.certOut); err != nil {
			return err
		}
	}
	// The clients' code is the README's quick start: one client.Client
	// (the package the README recommends) for every call below.
	cfg := client.Config{
		Seeds:    []string{srv.Addr().String()},
		TenantID: server.DemoTenant,
		Token:    server.DemoToken,
		CAPEM:    srv.CertificatePEM(), // what -cert-out writes; CAFile names such a file
		// Ask for the publisher of each event batch (subscriber checks).
		Conn: conn.Config{Flags: felix.DefaultClientFlags() | felix.FlagEventBatchPublisher},
		// The connection's end (step 6) is a Notice: client.Client hides
		// its connections.
		OnNotice: func(n client.Notice) {
			if n.Kind == client.NoticeDisconnected {
				select {
				case disconnected <- n.Err:
				default:
				}
			}
		},
	}
	if o.via != "" {
		// A relay in front of the broker: trust its certificate, and stay
		// on it (no discovery of the broker's own address behind it).
		cfg.Seeds, cfg.CAPEM, cfg.CAFile, cfg.NoDiscovery = []string{o.via}, nil, o.viaCert, true
		fmt.Fprintf(out, "clients: connecting via %s\n", o.via)
	}
	c, err := client.Dial(ctx, cfg)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	defer c.Close()
	fmt.Fprintf(out, "client: connected to %v\n", c.Brokers())

	topic := client.Topic{TenantID: server.DemoTenant, Namespace: "demo", Stream: "orders"}

	// 1. A live subscriber, before anything is published.
	live, err := c.Subscribe(ctx, topic, client.SubscribeOptions{})
	if err != nil {
		return fmt.Errorf("live subscribe: %w", err)
	}
	defer live.Close()
	fmt.Fprintf(out, "subscriber A (live): subscription %d\n", live.Info().SubscriptionID)
	liveDone := make(chan result, 1)
	go func() { liveDone <- consume(ctx, live, n) }()

	// 2. The publisher: n records in acknowledged batches.
	fmt.Fprintf(out, "publisher: %d records in acked batches of %d to %s/%s\n", n, batch, topic.Namespace, topic.Stream)
	start := time.Now()
	offsetsOK := true
	for i := 0; i < n; i += batch {
		m := min(batch, n-i)
		payloads := make([][]byte, m)
		for j := range payloads {
			payloads[j] = []byte("order-" + strconv.Itoa(i+j))
		}
		res, err := c.PublishBatch(ctx, topic, payloads, client.PublishOptions{}) // the zero options wait for the ack
		if err != nil {
			return fmt.Errorf("publish: %w", err)
		}
		if !res.HasOffset || res.Offset != uint64(i) {
			offsetsOK = false
		}
	}
	pubTime := time.Since(start)
	chk.check(offsetsOK, "every ack carried the batch's first offset (ack on commit)")
	lr := <-liveDone
	liveTime := time.Since(start)
	chk.check(lr.err == nil && lr.count == n && lr.inOrder, "subscriber A received all %d records once, in offset order (%s)", n, lr.describe())
	chk.check(lr.publisher == server.DemoTenant, "events carry the publisher %q", server.DemoTenant)

	// 3. A second subscriber replays from the earliest offset.
	rstart := time.Now()
	early, err := c.Subscribe(ctx, topic, client.SubscribeOptions{Start: client.Earliest})
	if err != nil {
		return fmt.Errorf("earliest subscribe: %w", err)
	}
	defer early.Close()
	fmt.Fprintf(out, "subscriber B (earliest): subscription %d, start offset %d, live offset %d\n",
		early.Info().SubscriptionID, early.Info().StartOffset.V, early.Info().LiveOffset.V)
	er := consume(ctx, early, n)
	replayTime := time.Since(rstart)
	chk.check(er.err == nil && er.count == n && er.inOrder, "subscriber B replayed all %d records once, in order (%s)", n, er.describe())

	// 4. Cache calls.
	fmt.Fprintln(out, "cache:")
	ref := client.CacheRef{TenantID: server.DemoTenant, Namespace: "demo", Cache: "sessions"}
	w, err := c.CacheWatch(ctx, ref, client.WatchOptions{Prefix: felix.Some("user:")})
	if err != nil {
		return fmt.Errorf("cache watch: %w", err)
	}
	defer w.Close()
	err = c.CachePut(ctx, ref, "user:1", []byte("alice"), 0)
	chk.check(err == nil, "put user:1 = alice")
	v, found, err := c.CacheGet(ctx, ref, "user:1")
	chk.check(err == nil && found && string(v) == "alice", "get user:1 -> %q", v)
	putEnd, err := putBeforeExpiry(ctx, c, ref, "user:2", []byte("bob"), ttl)
	chk.check(err == nil, "put user:2 = bob with a %s TTL; get before expiry -> found", ttl)
	// The broker set the expiry when it received the put, at the latest
	// when the put returned: after that plus the TTL the entry is gone.
	time.Sleep(time.Until(putEnd.Add(ttl + 10*time.Millisecond)))
	_, found, err = c.CacheGet(ctx, ref, "user:2")
	chk.check(err == nil && !found, "get user:2 after expiry -> miss")
	old, found, err := c.CacheDelete(ctx, ref, "user:1")
	chk.check(err == nil && found && string(old) == "alice", "delete user:1 -> removed %q", old)
	_, found, _ = c.CacheGet(ctx, ref, "user:1")
	chk.check(!found, "get user:1 after delete -> miss")
	var cnt int64
	for range 5 {
		cnt, _, err = c.CounterAdd(ctx, ref, "logins", 2)
	}
	chk.check(err == nil && cnt == 10, "counter logins += 2, five times -> %d", cnt)
	var kinds []string
	for {
		ev, err := w.Next(ctx)
		if err != nil {
			kinds = append(kinds, err.Error())
			break
		}
		k := "put " + ev.Key
		if ev.Deleted {
			k = "delete " + ev.Key
		}
		// putBeforeExpiry may have put user:2 more than once.
		if len(kinds) == 0 || kinds[len(kinds)-1] != k {
			kinds = append(kinds, k)
		}
		if k == "delete user:1" {
			break
		}
	}
	chk.check(fmt.Sprint(kinds) == "[put user:1 put user:2 delete user:1]", "watch on prefix user: saw %v", kinds)

	// 5. Throughput and broker counters.
	st := srv.Stats().Engine
	fmt.Fprintln(out, "throughput:")
	fmt.Fprintf(out, "  publish (acked, batches of %d): %s records/s (%d records in %v)\n", batch, rate(n, pubTime), n, pubTime.Round(time.Millisecond))
	fmt.Fprintf(out, "  live delivery to subscriber A:  %s records/s\n", rate(n, liveTime))
	fmt.Fprintf(out, "  replay to subscriber B:         %s records/s\n", rate(n, replayTime))
	fmt.Fprintf(out, "broker: %d batches / %d records published, %d records delivered, %d dropped, %d event encodings\n",
		st.PublishedBatches, st.PublishedRecords, st.DeliveredRecords, st.DroppedRecords, st.EventEncodes)
	chk.check(st.DroppedBatches == 0, "no subscriber queue dropped anything")

	// 6. Graceful shutdown: the broker finishes the event streams, then
	// closes the connection with code 0, which the client reports as a
	// NoticeDisconnected. (Its subscriptions would resume on another
	// broker of a cluster; this one has no other, so they are closed.)
	sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
	defer scancel()
	err = srv.Shutdown(sctx)
	stopped = true
	chk.check(err == nil && <-served == nil, "broker shut down gracefully")
	var cause error
	select {
	case cause = <-disconnected:
	case <-sctx.Done():
		cause = sctx.Err()
	}
	var ae *quic.ApplicationError
	closed := errors.As(cause, &ae) && ae.Remote && ae.ErrorCode == conn.CloseShuttingDown
	chk.check(closed, "the broker closed the connection with code 0 (%v)", cause)

	if len(chk.failed) > 0 {
		return fmt.Errorf("%d check(s) failed: %v", len(chk.failed), chk.failed)
	}
	fmt.Fprintln(out, "demo: all checks passed")
	return nil
}

// result summarises what a subscriber received.
type result struct {
	count     int
	inOrder   bool
	publisher string
	err       error
}

func (r result) describe() string {
	if r.err != nil {
		return "error: " + r.err.Error()
	}
	return fmt.Sprintf("%d records, in order %v", r.count, r.inOrder)
}

// consume reads n events and checks that offsets run 0..n-1 and payloads
// match them.
func consume(ctx context.Context, s *client.Subscription, n int) result {
	r := result{inOrder: true}
	for ev, err := range s.All(ctx) {
		if err != nil {
			r.err = err
			return r
		}
		if !ev.HasOffset || ev.Offset != uint64(r.count) || string(ev.Payload) != "order-"+strconv.Itoa(r.count) {
			r.inOrder = false
		}
		r.publisher = string(ev.Publisher)
		if r.count++; r.count == n {
			return r
		}
	}
	r.err = io.ErrUnexpectedEOF // the broker finished the stream early
	return r
}

func rate(n int, d time.Duration) string {
	if d <= 0 {
		return "n/a"
	}
	return strconv.FormatFloat(float64(n)/d.Seconds(), 'f', 0, 64)
}

// ttl is the demo's cache TTL.
const ttl = 200 * time.Millisecond

// putBeforeExpiry puts key with a TTL and checks that a get made before the
// TTL can have run out finds it. The broker starts the TTL when it receives
// the put, after start, so a get answered before start+ttl must find the
// value; when the machine was too slow for that (the get came later), the
// attempt proves nothing and is repeated. It returns when the last put
// returned.
func putBeforeExpiry(ctx context.Context, c *client.Client, ref client.CacheRef, key string, v []byte, ttl time.Duration) (time.Time, error) {
	for {
		start := time.Now()
		if err := c.CachePut(ctx, ref, key, v, ttl); err != nil {
			return time.Time{}, err
		}
		putEnd := time.Now()
		got, found, err := c.CacheGet(ctx, ref, key)
		if err != nil {
			return putEnd, err
		}
		if time.Since(start) < ttl {
			if !found || string(got) != string(v) {
				return putEnd, fmt.Errorf("get %s before expiry: found %v, %q", key, found, got)
			}
			return putEnd, nil
		}
		if err := ctx.Err(); err != nil {
			return putEnd, err
		}
	}
}
