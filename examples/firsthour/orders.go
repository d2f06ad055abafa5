package main

// The orders program is the rest of a first hour with the client: an
// idempotent producer, a plain and a fire-and-forget publish, a
// subscription to one shard, a consumer group that claims and acks, an
// atomic commit of an event with the entity's state, a conditional
// publish, and the errors a program meets, each classified with names of
// package client (errors.Is, errors.As, RetryClassOf).

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/flxproto/felix/client"
)

// ordersStream is the orders program's durable one-shard stream.
const ordersStream = "orders"

func runOrders(ctx context.Context, fx fixture, out io.Writer) error {
	check := checker{out}.check
	c, err := client.Dial(ctx, fx.config())
	if err != nil {
		return err
	}
	defer c.Close()
	orders := client.Topic{TenantID: fx.TenantID, Namespace: fx.Namespace, Stream: ordersStream}
	run := strconv.FormatInt(time.Now().UnixNano(), 36) // this run's records, among earlier runs'

	view, err := c.StreamShards(ctx, orders)
	if err != nil {
		return err
	}
	if err := check(view.Shards == 1, "%s is a one-shard stream", ordersStream); err != nil {
		return err
	}

	// An idempotent producer: a batch whose answer is lost is re-sent under
	// the same sequence, and the broker writes it once.
	p, err := c.NewProducer(ctx)
	if err != nil {
		return err
	}
	var sent int
	var first uint64 // this run's first offset
	for i := range 3 {
		batch := [][]byte{[]byte(run + " order " + strconv.Itoa(2*i)), []byte(run + " order " + strconv.Itoa(2*i+1))}
		res, err := p.PublishBatch(ctx, orders, batch, client.PublishOptions{Key: []byte("customer-7")})
		if err != nil {
			return err
		}
		if i == 0 {
			first = res.Offset
		}
		if err := check(res.HasOffset && res.Offset == first+uint64(sent), "producer %d batch %d acknowledged at offset %d", p.ID(), i, res.Offset); err != nil {
			return err
		}
		sent += len(batch)
	}
	// A plain acknowledged publish, and a fire-and-forget one that Flush
	// waits for.
	if _, err := c.Publish(ctx, orders, []byte(run+" order 6"), client.PublishOptions{}); err != nil {
		return err
	}
	if _, err := c.Publish(ctx, orders, []byte(run+" order 7"), client.PublishOptions{NoAck: true}); err != nil {
		return err
	}
	if err := c.Flush(ctx); err != nil {
		return err
	}
	sent += 2

	// The records as stored, read back by offset.
	page, err := c.StreamRead(ctx, orders, 0, client.ReadOptions{From: first, MaxRecords: uint32(sent)})
	if err != nil {
		return err
	}
	if err := check(len(page.Records) == sent && page.Next == first+uint64(sent), "StreamRead returns the %d records from offset %d", len(page.Records), first); err != nil {
		return err
	}

	// One shard's subscription, from this run's first offset.
	sub, err := c.Subscribe(ctx, orders, client.SubscribeOptions{Start: client.StartAt(first), Shard: 0})
	if err != nil {
		return err
	}
	for i := range sent {
		ev, err := sub.Next(ctx)
		if err != nil {
			return fmt.Errorf("subscription: %w", err)
		}
		if want := run + " order " + strconv.Itoa(i); string(ev.Payload) != want || ev.Offset != first+uint64(i) {
			return fmt.Errorf("subscription: record %d is %q at %d, want %q at %d", i, ev.Payload, ev.Offset, want, first+uint64(i))
		}
	}
	sub.Close()
	if err := check(true, "the subscription delivered the %d records in order from offset %d", sent, first); err != nil {
		return err
	}

	// A consumer group placed at this run's first record: poll, ack.
	g := c.Group(client.GroupRef{Topic: orders, Shard: 0, Group: "billing-" + run})
	if _, err := g.Seek(ctx, client.StartAt(first), true); err != nil {
		return err
	}
	acked := 0
	for acked < sent {
		recs, err := g.Poll(ctx, client.PollOptions{Max: 100, Wait: time.Second})
		if err != nil {
			return err
		}
		for _, r := range recs {
			if err := g.Ack(ctx, r.Offset); err != nil {
				return err
			}
			acked++
		}
	}
	info, err := g.Describe(ctx)
	if err != nil {
		return err
	}
	if err := check(info.InFlight == 0 && info.HasCommitted && info.Committed == first+uint64(sent),
		"the consumer group claimed and acked %d records (committed %d, none in flight)", acked, info.Committed); err != nil {
		return err
	}

	// An atomic commit: the event and the entity's state, together or not
	// at all; the state's version is the event's offset.
	order := []byte("order-" + run)
	off, err := c.Commit(ctx, client.CommitRequest{Topic: orders, EntityKey: order, Ops: []client.CommitOp{
		client.PublishEvent("", []byte(run+" paid")), client.PutState("", "status", []byte("paid")),
	}})
	if err != nil {
		return err
	}
	st, err := c.StateGet(ctx, orders, order, "status")
	if err != nil {
		return err
	}
	if err := check(st.Found && string(st.Value) == "paid" && st.Version == off, "the commit at offset %d wrote the state status=paid (version %d)", off, st.Version); err != nil {
		return err
	}

	// A conditional publish at a stale offset is refused, nothing written.
	_, err = c.PublishIf(ctx, orders, [][]byte{[]byte("late")}, nil, first)
	var refused *client.PublishRefusedError
	if err := check(errors.As(err, &refused), "a publish_if at a stale offset is a *client.PublishRefusedError (%v)", err); err != nil {
		return err
	}

	return classify(ctx, fx, c, orders, check)
}

// classify meets the errors a program handles and tells them apart with
// names of package client alone.
func classify(ctx context.Context, fx fixture, c *client.Client, orders client.Topic, check func(bool, string, ...any) error) error {
	// A commit the client refuses before sending: no event.
	_, err := c.Commit(ctx, client.CommitRequest{Topic: orders, EntityKey: []byte("x"),
		Ops: []client.CommitOp{client.PutState("", "k", []byte("v"))}})
	var ce *client.CommitError
	if err := check(errors.Is(err, client.ErrCommitEventCount) && errors.As(err, &ce), "a commit without an event: client.ErrCommitEventCount (%v)", err); err != nil {
		return err
	}
	// A topic of another tenant: refused before sending.
	other := client.Topic{TenantID: fx.TenantID + "-other", Namespace: orders.Namespace, Stream: orders.Stream}
	_, err = c.Publish(ctx, other, []byte("x"), client.PublishOptions{})
	var ne *client.NameError
	if err := check(errors.Is(err, client.ErrTenantMismatch) && errors.As(err, &ne), "another tenant's topic: client.ErrTenantMismatch (%v)", err); err != nil {
		return err
	}
	// A stream the broker does not have: a fatal broker answer.
	if fx.MissingStream != "" {
		missing := client.Topic{TenantID: fx.TenantID, Namespace: fx.Namespace, Stream: fx.MissingStream}
		_, err = c.Publish(ctx, missing, []byte("x"), client.PublishOptions{})
		var be *client.BrokerError
		if err := check(errors.As(err, &be) && be.Code == client.CodeNotFound && client.RetryClassOf(err) == client.RetryFatal,
			"an unknown stream: a *client.BrokerError with client.CodeNotFound, client.RetryFatal (%v)", err); err != nil {
			return err
		}
	}
	// Credentials the broker refuses.
	bad := fx.config()
	bad.Token = "not-" + fx.Token
	_, err = client.Dial(ctx, bad)
	var de *client.DialError
	if err := check(errors.Is(err, client.ErrAuthRefused) && errors.As(err, &de), "a wrong token: client.ErrAuthRefused in a *client.DialError"); err != nil {
		return err
	}
	// A broker certificate the client does not trust (a custom TLS
	// configuration trusting no authority).
	untrusting := fx.config()
	untrusting.CAFile, untrusting.TLS = "", &tls.Config{RootCAs: x509.NewCertPool()}
	_, err = client.Dial(ctx, untrusting)
	if err := check(errors.Is(err, client.ErrCertUntrusted) && client.RetryClassOf(err) == client.RetryFatal, "an untrusted certificate: client.ErrCertUntrusted, not retried"); err != nil {
		return err
	}
	// A token without permissions: forbidden.
	if fx.UnauthorizedToken != "" {
		weak := fx.config()
		weak.Token = fx.UnauthorizedToken
		wc, err := client.Dial(ctx, weak)
		if err != nil {
			return err
		}
		_, err = wc.Publish(ctx, orders, []byte("x"), client.PublishOptions{})
		wc.Close()
		var be *client.BrokerError
		if err := check(errors.As(err, &be) && be.Code == client.CodeForbidden, "a token without the permission: client.CodeForbidden (%v)", err); err != nil {
			return err
		}
	}
	// A call on a closed client.
	c.Close()
	_, err = c.Publish(ctx, orders, []byte("x"), client.PublishOptions{})
	return check(errors.Is(err, client.ErrClosed), "a call after Close: client.ErrClosed")
}
