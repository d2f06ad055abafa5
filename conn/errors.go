package conn

import (
	"errors"
	"fmt"

	"github.com/quic-go/quic-go"

	"github.com/flxproto/felix"
)

// Application close codes on client connections (docs/transport.md §1).
const (
	// CloseShuttingDown (0) closes a connection because its owner is going
	// away (broker shutting down, client closing).
	CloseShuttingDown quic.ApplicationErrorCode = 0
	// CloseAuthTimeout (1) closes a connection on which no stream
	// authenticated within the auth timeout, one that opened too many
	// unauthenticated streams, or the oldest unauthenticated connection
	// when a new one arrives while ServerConfig.MaxUnauthConns are
	// unauthenticated ("too many unauthenticated connections").
	CloseAuthTimeout quic.ApplicationErrorCode = 1
)

// Sentinel errors.
var (
	// ErrClosed: the Client, Subscription, Listener or stream was closed by
	// this side.
	ErrClosed = errors.New("conn: closed")
	// ErrAnswerTimeout: a server stream's answer was not taken by the
	// client within ServerConfig.AnswerWriteTimeout (it does not read its
	// answers): the answer was cut or never begun, and the stream was
	// reset. Forget the stream: its client is not reading.
	ErrAnswerTimeout = errors.New("conn: answer write timed out (the client does not read)")
	// ErrBrokerShutdown: the broker closed the connection with
	// CloseShuttingDown (it is shutting down or draining); reconnect, to
	// another broker if need be. A client call that failed because of it
	// returns a *TransportError wrapping the *quic.ApplicationError, which
	// errors.Is matches with ErrBrokerShutdown. A subscription or cache
	// watch ends with io.EOF when Next read the end of its event stream
	// (the broker finishes every event stream before it closes) and with
	// an ErrBrokerShutdown error when the connection closed first: QUIC
	// then discards what Next had not read yet, so resume from the last
	// offset seen.
	ErrBrokerShutdown = errors.New("conn: broker shut down")
)

// TransportError wraps an error of the QUIC layer (connection closed, idle
// timeout, stream reset, ...). Unwrap reaches the quic-go error, e.g.
// *quic.ApplicationError with ErrorCode CloseShuttingDown when the broker
// went away; on the client side errors.Is(err, ErrBrokerShutdown) reports
// that case.
type TransportError struct {
	// Op is the operation that failed ("dial", "read event stream", ...).
	Op string
	// Err is the underlying (usually quic-go) error.
	Err error

	// client marks an error of a Client, for which a remote close with
	// CloseShuttingDown is a broker shutdown.
	client bool
}

// Is makes errors.Is(err, ErrBrokerShutdown) true for a client error caused
// by the broker closing the connection with CloseShuttingDown.
func (e *TransportError) Is(target error) bool {
	return target == ErrBrokerShutdown && e.client && isRemoteShutdown(e.Err)
}

// isRemoteShutdown reports whether err is the peer's connection close with
// CloseShuttingDown.
func isRemoteShutdown(err error) bool {
	var ae *quic.ApplicationError
	return errors.As(err, &ae) && ae.Remote && ae.ErrorCode == CloseShuttingDown
}

// Error formats the error.
func (e *TransportError) Error() string { return "conn: " + e.Op + ": " + e.Err.Error() }

// Unwrap returns the underlying error.
func (e *TransportError) Unwrap() error { return e.Err }

// transportErr wraps err in a *TransportError unless it already is one or
// is one of this package's or the codec's typed errors.
func transportErr(op string, err error) error {
	if err == nil {
		return nil
	}
	var te *TransportError
	var fe *felix.Error
	var be *felix.BrokerError
	if errors.As(err, &te) || errors.As(err, &fe) || errors.As(err, &be) || errors.Is(err, ErrClosed) || errors.Is(err, felix.ErrProtocol) {
		return err
	}
	return &TransportError{Op: op, Err: err}
}

// clientErr is transportErr for the client side: the resulting
// *TransportError matches ErrBrokerShutdown when the broker closed the
// connection with CloseShuttingDown.
func clientErr(op string, err error) error {
	err = transportErr(op, err)
	if te, ok := err.(*TransportError); ok {
		te.client = true
	}
	return err
}

// protocolErr builds an felix.ErrProtocol error with a detail.
func protocolErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{felix.ErrProtocol}, args...)...)
}

// notAdvertised builds an felix.ErrNotAdvertised error naming what was missing.
func notAdvertised(what string) error {
	return fmt.Errorf("%w: %s", felix.ErrNotAdvertised, what)
}
