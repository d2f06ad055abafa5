package conn

import (
	"context"
	"io"

	"github.com/flxproto/felix"
)

// RawStream is an authenticated, negotiated client stream on which any
// felix.Message can be sent and any answer read: the hook for requests this
// package does not wrap (new message types, extensions, debugging tools,
// proxies). Open it with Client.OpenRaw. It is not safe for concurrent
// Sends or concurrent Recvs (one writer and one reader may run at once).
type RawStream struct {
	cs *clientStream
}

// OpenRaw opens a new stream, authenticates it with the client's
// credentials and offer, and returns it. Its Capabilities are what the
// broker advertised on it. Close it when done.
func (c *Client) OpenRaw(ctx context.Context) (*RawStream, error) {
	cs, err := c.openStream(ctx)
	if err != nil {
		return nil, err
	}
	return &RawStream{cs: cs}, nil
}

// Capabilities returns what the broker advertised on this stream.
func (r *RawStream) Capabilities() felix.Capabilities { return r.cs.caps }

// Send writes m as one JSON control frame. A request whose type is gated
// on a feature the stream's broker did not advertise (felix.LookupRequest),
// and a type this package does not know (felix.UnknownMessage) on a stream
// without felix.FeatureUnsupported (an older broker would close the stream
// or the connection), fail with felix.ErrNotAdvertised and nothing is sent. A
// second auth is refused the same way: the stream is already
// authenticated. If ctx interrupts the write mid-frame the stream is reset
// and must be closed.
func (r *RawStream) Send(ctx context.Context, m felix.Message) error {
	if err := checkRaw(r.cs.caps, m.MessageType()); err != nil {
		return err
	}
	return writeCtx(ctx, func(ctx context.Context) error { return r.cs.w.writeMessage(ctx, m) })
}

// checkRaw says whether a raw request of type typ may be sent on a stream
// with caps.
func checkRaw(caps felix.Capabilities, typ string) error {
	if typ == "auth" {
		return notAdvertised("a second auth on an authenticated stream")
	}
	if _, known := felix.LookupRequest(typ); known {
		if !caps.CanRequest(typ) {
			return notAdvertised(typ)
		}
		return nil
	}
	if !caps.Features.Has(felix.FeatureUnsupported) {
		return notAdvertised(typ + " (not a known request, and the broker did not advertise " + felix.FeatureUnsupported.String() + ")")
	}
	return nil
}

// ReadFrame reads the next frame of any kind. The payload is the caller's
// (a fresh copy). At the end of the stream it returns io.EOF. If ctx
// interrupts the read the stream is no longer on a frame boundary and must
// be closed.
func (r *RawStream) ReadFrame(ctx context.Context) (felix.Frame, error) {
	f, _, err := readFrameCtx(ctx, r.cs.r, r.cs.s)
	r.cs.seen(f, err)
	if err != nil {
		if err == io.EOF || ctx.Err() != nil {
			return felix.Frame{}, err
		}
		return felix.Frame{}, clientErr("read raw stream", err)
	}
	f.Payload = append([]byte(nil), f.Payload...)
	return f, nil
}

// Recv reads the next frame and decodes it as a JSON control message. A
// binary frame is an felix.ErrProtocol error (use ReadFrame to read those). At
// the end of the stream it returns io.EOF.
func (r *RawStream) Recv(ctx context.Context) (felix.Message, error) {
	f, err := r.ReadFrame(ctx)
	if err != nil {
		return nil, err
	}
	if f.Flags != 0 {
		return nil, protocolErr("binary frame %s on a raw stream read with Recv", f.Flags)
	}
	return felix.DecodeMessage(f.Payload)
}

// CloseWrite finishes the sending side (the broker reads the end of the
// stream after the last request); answers can still be read.
func (r *RawStream) CloseWrite() error { return r.cs.s.Close() }

// Close abandons the stream in both directions. It is idempotent.
func (r *RawStream) Close() error {
	r.cs.abort()
	return nil
}

// RawRequest sends m on a stream of its own and returns the broker's first
// answer, as it came (an error message is returned as a *felix.ErrorMessage,
// not as an error). It is gated as RawStream.Send. Use OpenRaw for requests
// answered by more than one frame.
func (c *Client) RawRequest(ctx context.Context, m felix.Message) (felix.Message, error) {
	if err := c.checkOpen(); err != nil {
		return nil, err
	}
	if err := checkRaw(c.caps, m.MessageType()); err != nil {
		return nil, err
	}
	cs, err := c.openStream(ctx)
	if err != nil {
		return nil, err
	}
	if err := checkRaw(cs.caps, m.MessageType()); err != nil {
		cs.abort()
		return nil, err
	}
	return cs.oneShot(ctx, m)
}
