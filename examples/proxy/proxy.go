package main

import (
	"context"
	"crypto/tls"
	"errors"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
)

// proxied is what the proxy handles itself and offers its clients when the
// upstream broker advertised it. Idempotent producers are not proxied
// (producer ids belong to the upstream connection), nor are redirects (the
// owner a not_leader names is a broker, not a proxy: clients get an error
// with code not_leader and retry class redirect instead).
const proxied = felix.FeatureErrorCodes | felix.FeatureSubscriptionLagged | felix.FeatureShardMoved |
	felix.FeatureStreamDeleted | felix.FeatureSubscribeQueue | felix.FeaturePublishPipeline | felix.FeatureStreamPublishWindow

// Proxy accepts Felix clients and forwards their publishes and
// subscriptions to one upstream broker over one upstream connection.
//
// The upstream is a conn.Client, not the client.Client applications use,
// on purpose: the proxy relays each client's request as it came and each
// outcome as it went, so the retries, redirects and resumes belong to the
// downstream client (a proxy that retried would re-send publishes the
// downstream client may re-send too, and hide a not_leader it must see).
// It also needs what only one connection has: the broker's offer to
// mirror (Capabilities: flags, features, publish window) and the
// asynchronous publishes (PublishViewAsync, PublishBatchAsync) that
// forward binary batches without taking them apart, answered in order.
type Proxy struct {
	up *conn.Client
	ln *conn.Listener
}

// Listen starts a proxy on addr (UDP) for the upstream client up. auth
// checks the clients' tokens (nil accepts any).
func Listen(addr string, srvTLS *tls.Config, up *conn.Client, auth conn.Authenticator) (*Proxy, error) {
	caps := up.Capabilities()
	ln, err := conn.Listen(addr, &conn.ServerConfig{TLS: srvTLS, Authenticate: auth, Offer: felix.BrokerOffer{
		Flags:         caps.Flags &^ felix.FlagBinaryPublishIdempotent,
		Features:      caps.Features & proxied,
		PublishWindow: caps.PublishWindow,
	}})
	if err != nil {
		return nil, err
	}
	return &Proxy{up: up, ln: ln}, nil
}

// Addr returns the address clients connect to.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Close stops the proxy and ends its clients' connections.
func (p *Proxy) Close() error { return p.ln.Close() }

// Serve accepts clients until ctx ends or the proxy is closed.
func (p *Proxy) Serve(ctx context.Context) error {
	for {
		sc, err := p.ln.Accept(ctx)
		if err != nil {
			return err
		}
		go func() {
			for {
				st, err := sc.AcceptStream(ctx)
				if err != nil {
					return
				}
				go p.serve(st)
			}
		}()
	}
}

// serve forwards the requests of one client stream.
func (p *Proxy) serve(st *conn.Stream) {
	ctx := st.Conn().Context()
	defer func() {
		st.WaitAnswers(ctx) // a client may finish its side before the answers
		st.Close()
	}()
	for {
		req, err := st.ReadRequest(ctx)
		if err != nil {
			return
		}
		switch m := req.Message.(type) {
		case nil: // a binary publish
			err = p.publishBinary(ctx, st, req)
		case *felix.Publish:
			err = p.publish(ctx, st, req, topic(m.TenantID, m.Namespace, m.Stream), [][]byte{m.Payload}, m.Ack, m.Key)
		case *felix.PublishBatchMessage:
			err = p.publish(ctx, st, req, topic(m.TenantID, m.Namespace, m.Stream), m.Payloads, m.Ack, m.Key)
		case *felix.Subscribe:
			p.subscribe(ctx, st, m)
			return
		default:
			err = st.WriteErr(ctx, &felix.BrokerError{Message: "not proxied: " + m.MessageType(), Code: felix.CodeInvalidRequest})
		}
		if err != nil {
			return
		}
	}
}

func topic(tenant, ns, stream string) felix.Topic {
	return felix.Topic{TenantID: tenant, Namespace: ns, Stream: stream}
}

// publishBinary forwards a binary batch without taking its payloads apart.
// The answer comes back in the client's form (binary ack or JSON), in
// request order, whatever order the upstream answers in.
func (p *Proxy) publishBinary(ctx context.Context, st *conn.Stream, req conn.Request) error {
	pa, err := st.ReservePublish(req)
	if err != nil {
		return st.WriteErr(ctx, err)
	}
	v, err := felix.ParsePublishBatch(req.Flags, req.Payload)
	if err == nil && v.Idempotent() {
		err = errors.New("idempotent publishes are not proxied")
	}
	if err != nil {
		pa.Post(felix.PublishResult{}, &felix.BrokerError{Message: err.Error(), Code: felix.CodeInvalidRequest})
		return nil
	}
	o := conn.PublishOptions{Ack: v.AckMode, NoAck: v.AckMode == felix.AckNone, Key: v.Key}
	t := topic(string(v.TenantID), string(v.Namespace), string(v.Stream))
	if err := p.up.PublishViewAsync(ctx, t, &v, o, pa.Post); err != nil {
		pa.Post(felix.PublishResult{}, err) // not sent upstream
	}
	return nil
}

// publish forwards a JSON publish or publish_batch.
func (p *Proxy) publish(ctx context.Context, st *conn.Stream, req conn.Request, t felix.Topic, payloads [][]byte,
	ack felix.Opt[felix.AckMode], key felix.Opt[[]byte]) error {
	pa, err := st.ReservePublish(req)
	if err != nil {
		return st.WriteErr(ctx, err)
	}
	o := conn.PublishOptions{Ack: felix.AckPerBatch, Key: key.V}
	if ack.Set {
		o.Ack, o.NoAck = ack.V, ack.V == felix.AckNone // "none": fire-and-forget upstream too
	}
	if err := p.up.PublishBatchAsync(ctx, t, payloads, o, pa.Post); err != nil {
		pa.Post(felix.PublishResult{}, err)
	}
	return nil
}

// subscribe forwards a subscription batch by batch, as the frames arrive,
// and ends it the way the upstream subscription ended: a lag, a moved
// shard or a deleted stream reaches the client as its own terminal frame,
// never as a clean end.
func (p *Proxy) subscribe(ctx context.Context, st *conn.Stream, m *felix.Subscribe) {
	o := conn.SubscribeOptions{Start: m.Start.V, Shard: m.Shard, QueueCapacity: m.QueueCapacity.V}
	sub, err := p.up.Subscribe(ctx, topic(m.TenantID, m.Namespace, m.Stream), o)
	if err != nil {
		st.WriteErr(ctx, err) // cursor errors, not_leader, ... as the broker answered
		return
	}
	defer sub.Close()
	es, err := st.StartSubscription(ctx, sub.Info())
	if err != nil {
		return
	}
	for {
		// The event stream's context governs the subscription: it ends
		// when the client unsubscribes or goes away.
		f, err := sub.NextFrame(es.Context())
		if err != nil {
			es.End(es.Context(), err)
			return
		}
		if err := es.ForwardBatch(es.Context(), f); err != nil {
			return
		}
	}
}
