package client

import (
	"context"
	"errors"
)

// Flush waits until every broker this client is connected to has read
// the fire-and-forget publishes (PublishOptions.NoAck) written to it
// before the call (conn.Client.Flush on each connection). It does not
// tell whether they were accepted: publish acknowledged (the default) for
// that. A connection lost while its flush waited is reported (what was
// written on it may be lost); publishes written on a connection lost
// before the call are not covered (fire-and-forget promises nothing
// there). Close drains too: it finishes every
// connection's publish streams and waits, up to 2 s each, for the brokers
// to finish them.
func (c *Client) Flush(ctx context.Context) error {
	if c.closed.Load() {
		return ErrClosed
	}
	c.mu.Lock()
	list := append([]*broker(nil), c.list...)
	c.mu.Unlock()
	var errs []error
	for _, b := range list {
		b.mu.Lock()
		cc := b.cc
		b.mu.Unlock()
		if cc == nil {
			continue
		}
		if err := cc.Flush(ctx); err != nil {
			errs = append(errs, &FlushError{Addr: b.addr, Err: err})
		}
	}
	return errors.Join(errs...)
}

// FlushError is a Flush that could not confirm one broker read what was
// written to it.
type FlushError struct {
	// Addr is the broker.
	Addr string
	// Err is the cause (a lost connection, ctx's error, ...).
	Err error
}

// Error names the broker.
func (e *FlushError) Error() string {
	return "client: flush " + e.Addr + ": fire-and-forget publishes written there may be lost: " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *FlushError) Unwrap() error { return e.Err }
