// Package conn speaks the Felix wire protocol over QUIC (github.com/quic-go/quic-go)
// for both ends of a connection: a client that talks to any Felix broker, and
// the server half a broker or proxy needs to serve Felix clients. It is a thin
// layer: framing, the per-stream auth handshake with capability negotiation,
// stream roles and request/answer correlation. It holds no broker logic.
//
// Applications use package client (github.com/flxproto/felix/client)
// instead: it is built on this package's Client and adds what one
// connection cannot do (discovery, redirects to shard owners, re-dials,
// retries, resumed subscriptions and watches). Use conn directly for one
// connection under your own control, or to write a broker or proxy.
//
// # Transport
//
// Connections use TLS 1.3 over QUIC. The ALPN id "felix/1" (ALPN) is offered
// by a client only when Config.OfferALPN is set, because older brokers refuse
// any client that offers ALPN; a Listener accepts clients that offer
// "felix/1" and clients that offer nothing, and refuses any other id. Both
// sides enable QUIC keep-alives and allow enough concurrent streams for many
// subscriptions (quic-go's default of 100 incoming uni streams is raised).
// Connections are closed with application code CloseShuttingDown (0) or
// CloseAuthTimeout (1).
//
// On Linux a client's and a listener's UDP sockets are read with UDP GRO:
// one system call reads up to 64 KiB of datagrams the kernel coalesced
// (a peer's GSO send arrives whole on loopback), which are handed to QUIC
// one packet at a time, each with the ECN bits and packet info it came
// with; sends keep quic-go's GSO and ECN. It cut a subscriber's CPU per
// received byte by 10-26 % and its allocation per byte by about two thirds
// in felix bench raw and client's BenchmarkSubscribeAlloc (BENCHMARKS.md,
// issue 31), and costs a 64 KiB buffer per socket and one copy per
// received packet.
// Config.NoGRO and ServerConfig.NoGRO read without it; a kernel that
// refuses the socket option, and other systems, read without it anyway.
//
// Every client-opened stream starts with an auth frame; frames are limited to
// 64 KiB until the stream has authenticated and to 16 MiB afterwards, and each
// frame is written with a single Write. Streams are read to their end and
// closed so that QUIC returns their stream credit.
//
// # Client
//
// Dial connects and authenticates a first stream; Client.Capabilities reports
// what the broker advertised there. Every encoding decision is taken from the
// advertised set of the stream it is sent on: binary publishes by default,
// the JSON forms when the broker did not advertise the binary bits (or when
// Config.ForceJSON is set), and felix.ErrNotAdvertised for requests the broker
// cannot take.
//
//	c, err := conn.Dial(ctx, "127.0.0.1:5000", &conn.Config{
//		TLS:      &tls.Config{RootCAs: roots, ServerName: "localhost"},
//		TenantID: "t1",
//		Token:    token,
//	})
//	if err != nil {
//		return err
//	}
//	defer c.Close()
//
//	topic := felix.Topic{TenantID: "t1", Namespace: "ns", Stream: "orders"}
//	res, err := c.PublishBatch(ctx, topic, [][]byte{a, b}, conn.PublishOptions{Ack: felix.AckPerBatch})
//	// res.Offset is set (res.HasOffset) when the broker acked after the write.
//
//	sub, err := c.Subscribe(ctx, topic, conn.SubscribeOptions{Start: felix.StartPosition{Kind: felix.StartEarliest}})
//	for ev, err := range sub.All(ctx) {
//		if err != nil {
//			// *felix.ShardMovedError, *felix.LaggedError, *felix.StreamDeletedError,
//			// *felix.BrokerError ... (io.EOF is not reported: the loop just ends)
//			break
//		}
//		use(ev.Payload, ev.Offset) // valid until the next iteration: ev.Clone() keeps it
//	}
//
//	calls := api.New(c) // the typed one-answer requests, over c.Request
//	err = calls.CachePut(ctx, felix.CacheRef{TenantID: "t1", Namespace: "ns", Cache: "c"}, "k", v, time.Minute)
//	v, found, err := calls.CacheGet(ctx, ref, "k") // a miss is found == false, not an error
//
// Acked publishes are pipelined: up to the broker's publish_window of them
// may be unanswered at once (shared by the connection's publish streams
// unless the broker grants a window per stream), and answers are matched by
// request_id. PublishBatch waits for its answer; PublishBatchAsync returns
// once the frame is written and reports the answer to a callback, so one
// goroutine can keep the whole window in flight.
//
// A subscription or cache watch has no goroutine of its own: Next reads its
// event stream, so a consumer that stops calling Next stops reading and
// QUIC flow control slows the broker; the client drops nothing. Every
// blocking call takes a context; cancelling it abandons the wait (a frame
// already written stays written, and an interrupted read resumes on the next
// call). Client.Close is idempotent, ends every subscription and waits for
// every goroutine the client started.
//
// Errors are typed: *felix.BrokerError (code, retry class, detail) for error
// answers, felix.ErrAuthRefused for a refused auth, *felix.CursorError,
// *felix.NotLeaderError, *felix.PublishRefusedError, the terminal *felix.ShardMovedError,
// *felix.LaggedError and *felix.StreamDeletedError, felix.ErrNotAdvertised when the broker
// did not advertise what a call needs (the request is not sent), felix.ErrProtocol for a
// peer that broke the protocol, and *TransportError wrapping quic-go's
// errors; when the broker shut down (it closed the connection with
// CloseShuttingDown) that error matches ErrBrokerShutdown. A subscription
// ends with io.EOF when Next read the end of its event stream, which the
// broker finishes before it closes the connection, or with ErrBrokerShutdown
// when the close came first.
//
// A failed Dial is a *DialError naming the address and what to check:
// ErrBadAddress (no port, an unknown port or host), ErrNoAnswer (nothing
// answered the handshake in time), ErrCertUntrusted (the broker's
// certificate was refused; CertPoolFromFile loads the PEM a reference
// broker writes with -cert-out) or felix.ErrAuthRefused (the tenant or the
// token was refused). A request whose frame would exceed
// Config.MaxFrameBytes is refused before sending with a *felix.FrameLimitError.
// A cancelled context ends a call with the context's error.
//
// # Requests
//
// Client.Request sends any one-answer request of felix.Requests() and
// returns its answer: it sets the request id, refuses (felix.ErrNotAdvertised,
// nothing sent) a request whose feature, or the feature of an option it
// sets, the broker did not advertise (felix.Capabilities.Unadvertised),
// sends caches and counters pipelined over the shared cache streams and
// every other request on a stream of its own (the protocol answers those
// on the stream they came on; not_leader carries no request id), and turns
// failure answers into the typed errors above. The typed calls over it
// (caches, counters, conditional writes, commits and state, consumer
// groups, stream reads, offsets by time, inspection and cluster queries)
// are package api's: api.New(c).Commit(ctx, ...), the same calls
// client.Client makes through its routing and retries. What stays here is
// what only a connection can do: the handshake, publish streams with their
// window (Publish, PublishBatch, PublishBatchAsync, NewProducer,
// PublishIdempotent), event streams (Subscribe, Watch) and Flush.
//
// OpenRaw and RawRequest send any felix.Message (an extension, a type this
// package does not know) on an authenticated, negotiated stream and return
// the answers as they came, error answers included, for tools and proxies.
//
// # Server
//
// Listen opens a listener whose connections run the auth handshake on every
// client-opened stream with the caller's Authenticator, answer auth_ok or the
// legacy ok through felix.BrokerOffer, enforce the server limits, and hand
// over authenticated streams. The limits (ServerConfig fields, spec
// docs/transport.md §6 defaults) bound what any client can make the server hold,
// each with a clear refusal: 8192 established connections and 1024
// handshakes in progress, apart (CONNECTION_REFUSED; past 64 handshakes a
// new one must first answer a QUIC Retry), 1024 streams of each kind per
// connection, 32 unauthenticated streams per connection (until one of its
// streams authenticated) of which 8 are read at once (a stream beyond
// them is reset with ResetPreAuthBudget, and a connection that opens as
// many again is closed), 10 s to authenticate
// each stream (reset with ResetAuthTimeout) and each connection
// (CloseAuthTimeout), 64 KiB frames before auth and 16 MiB after (answered
// limit_exceeded), 16 MiB of request bytes held per connection (further
// reads wait), and 16 MiB of answers being written per connection, each
// within 30 s (ErrAnswerTimeout, stream reset). A connection that never
// authenticates costs about 240 KiB measured (0.4 MiB derived; more when
// its unread bytes come in tiny QUIC frames, see docs/limits.md), a
// handshake never completed at most about 63 KiB (measured);
// Listener.Stats counts the refusals.
//
//	ln, err := conn.Listen("127.0.0.1:0", &conn.ServerConfig{
//		TLS:          serverTLS, // certificate for "localhost"
//		Offer:        felix.BrokerOffer{Flags: felix.KnownFlags, PublishWindow: 256},
//		Authenticate: func(ctx context.Context, a *felix.Auth) (any, error) { return a.TenantID, nil },
//	})
//	for {
//		sc, err := ln.Accept(ctx)
//		if err != nil {
//			return err
//		}
//		go func() {
//			for {
//				st, err := sc.AcceptStream(ctx) // authenticated client stream
//				if err != nil {
//					return
//				}
//				go serve(st) // st.ReadRequest / st.WriteMessage / st.WriteFrame
//			}
//		}()
//	}
//
// Server writes take a context too, since a QUIC write blocks while flow
// control holds it back (a slow or stalled client): pass the connection's
// context (ServerConn.Context) or a request's. A context that ends before a
// frame was started leaves the stream as it was; one that interrupts a
// frame half written resets the stream (a partial frame cannot be
// continued) and the write returns an error matching the context's error.
// ServerConn.Wait also takes a context.
//
// # Subscriptions: the event stream governs
//
// A subscription lives on its event stream, not on the control stream it
// was requested on. A client may stop reading its control stream as soon
// as it read subscribed (this package's Client does), which cancels that
// Stream's Context while the subscription goes on: events written under
// Stream.Context would be dropped and the client would see a clean end.
// Stream.StartSubscription opens the event stream, answers subscribed and
// closes the control stream; write the events under the returned
// EventStream's Context, which ends only when the client unsubscribes (it
// stops reading the event stream), the stream is closed, or the connection
// closes, and finish with EventStream.End:
//
//	es, err := st.StartSubscription(st.Context(), &felix.Subscribed{SubscriptionID: id})
//	if err != nil {
//		return
//	}
//	for batch := range batches {
//		if err := es.WriteEncoded(es.Context(), batch); err != nil {
//			return // unsubscribed or gone
//		}
//	}
//	es.End(es.Context(), upstreamErr) // subscription_lagged, shard_moved, ... or a clean end for nil
//
// # Answers
//
// Stream.ReservePublish and PendingAnswer.Resolve answer publishes in
// request order in the form the request and the client call for (binary
// ack, or publish_ok / publish_error / publish_refused with the request
// id); AnswerPublish does both at once. Stream.WriteErr and EventStream.End
// turn the typed errors of this package (*felix.BrokerError, *felix.NotLeaderError,
// *felix.CursorError, *felix.PublishRefusedError, *felix.LaggedError, *felix.ShardMovedError,
// *felix.StreamDeletedError) back into their frames, so a proxy forwards an
// upstream failure as the same failure, never as a clean end. A zero
// retry class is sent as the code's default on every path (docs/errors.md).
//
// # Identity
//
// The Authenticator's context carries the connection: AuthPeerFromContext
// gives the client's address and TLS state, with its verified certificate
// under mutual TLS (ServerConfig.TLS.ClientAuth), so a broker can bind a
// certificate's subject to the token's principal. The identity it returns
// is read back typed with IdentityOf[T](st); ServerConn.TLS and
// PeerCertificate give the same state later.
//
// # Event payloads
//
// A subscription reads its event batches into one recycled buffer: an
// Event's Payload and Publisher are valid until the next Next call (the
// next iteration of All), and Event.Clone makes a copy to keep.
// SubscribeOptions.Payloads chooses otherwise: PayloadsOwned (a buffer of
// its own per frame: events may be kept, one allocation per frame) or
// PayloadsUntilRelease (events handed to another goroutine in order, each
// frame's buffer recycled after Event.Release). Tests can check the rule:
// built with the felixpoison tag, every buffer a subscription stops
// vouching for is overwritten with 0xDB, so a payload kept too long reads
// as poison.
//
// # Batches, forwarded whole
//
// Subscription.NextFrame and NextBatch return an event batch as it arrived
// (a zero-copy felix.EventBatchView: offsets, publisher, timestamps), and
// EventStream.ForwardBatch writes it on as it is when the client accepts
// its bits (re-encoded otherwise). Client.PublishView forwards the payloads
// of a parsed publish batch as one block (felix.AppendPublishBatchView, no
// per-payload work), PublishSeq takes an iter.Seq[[]byte]. examples/proxy
// is a proxy built this way.
//
// ServerConn.OpenEventStream opens the uni stream of a subscription or cache
// watch and writes its event_stream_hello first. Outgoing frames are checked
// against what the client offered on the stream (Stream.Peer): a frame flag
// bit or a message the client cannot parse is refused with felix.ErrNotAdvertised,
// and the optional fields of error and publish answers are shaped to the
// client's offer.
//
// # Observing and debugging
//
// Config.Hooks and ServerConfig.Hooks (Hooks) report connections opened and
// closed, streams authenticated and refused, every frame read and written,
// publishes sent and answered with their latency, and lag; nil hooks cost
// a pointer comparison, and JoinHooks attaches several sets at no further
// cost. The cluster-aware client's own decisions (redirects, retries,
// resumes) are reported by package client (client.Notice), not here;
// Client.TransportStats reads a connection's QUIC byte and packet
// counters. examples/metrics turns them into
// Prometheus metrics. KeyLogWriter on both configs (KeyLogFromEnv for
// SSLKEYLOGFILE) writes the TLS secrets that let Wireshark or tshark
// decrypt a capture. The QUIC relay behind felix tap, which logs every
// frame between clients and a broker, is package conn/tap, outside the
// supported API. See docs/debugging.md.
package conn
