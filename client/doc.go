// Package client is the Felix client to use: one import for publishing,
// subscribing and caches against one broker or a cluster.
//
//	c, err := client.Dial(ctx, client.Config{
//		Seeds:    []string{"127.0.0.1:7447"}, // the rest of a cluster is discovered
//		TenantID: "t1", Token: "demo-token",
//		CAFile:   "broker.pem", // the broker's certificate (-cert-out)
//	})
//	if err != nil {
//		return err // says which address failed and what to check
//	}
//	defer c.Close() // drains what was written
//	orders := client.Topic{TenantID: "t1", Namespace: "shop", Stream: "orders"}
//	res, err := c.Publish(ctx, orders, []byte("hello"), client.PublishOptions{}) // acknowledged
//	sub, err := c.Subscribe(ctx, orders, client.SubscribeOptions{Start: client.Earliest})
//	for ev, err := range sub.All(ctx) { // resumes by itself after a lost connection
//		fmt.Println(ev.Offset, string(ev.Payload), err)
//	}
//
// Example (client/example_test.go) is the runnable version. The client is
// built on conn.Client, the single-connection building block (one QUIC
// connection to one broker, no re-dial, typed errors passed through).
//
// # Requests
//
// The client's request surface is three things. The typed one-answer
// requests (caches, counters, conditional writes, commits and state,
// consumer groups, reads, inspection) are methods of the client:
// c.CachePut, c.Commit, c.Group(ref).Poll, c.StreamRead ..., written once
// in package api and generated here from api.Calls (calls_gen.go), with
// api's types under client names (GroupRef, CommitRequest, ReadOptions,
// IfAbsent ...). Request sends any
// request of felix.Requests(), typed call or not; it is the api.Requestor
// those calls run on, so every request is routed, retried and checked by
// the same rules, read off the protocol's facts (felix.LookupRequest:
// Safe, Route) rather than written per call. At(addr) is a Requestor that
// pins one broker (api.New(c.At(addr)).ShardInspect(...), per-broker
// subscription lists): retried there, never moved or redirected.
//
// What both client.Client and conn.Client offer, and why each has its
// own: the streaming primitives — Publish, PublishBatch, Subscribe,
// CacheWatch, NewProducer — which keep a stream or a window open and so
// are not one-answer requests (conn's act on its one connection and end
// with it; the client's route to the shard's owner, resume and retry);
// Request (conn's sends on its connection and returns typed errors as
// they came, the client's follows the decision table below); Flush and
// Close (of one connection, or of every connection the client holds).
// What the client counts is Stats (conn.Client.TransportStats per
// connection); the negotiated Capabilities, addresses and raw streams
// (RawRequest, OpenRaw, for extension messages) belong to one connection
// and are conn's only.
//
// A Client starts from one or more seed addresses and learns the cluster
// from them (topology, auth_ok's listener_ports, owner hints), keeps one
// connection per broker it talks to, and heals them: a lost connection is
// re-dialled on demand, another broker first when the broker failed, with
// capped exponential backoff and full jitter (never shorter than a
// broker's retry_after_ms). One dial per broker is in flight at a time,
// shared by every call that needs the broker, and a broker that failed
// since its last successful dial is tried after every one that did not. Connections use upstream's 6 s idle timeout
// and 2 s keep-alive unless Config.Conn says otherwise.
//
// # Routing and redirects
//
// Requests for a shard go to its owner when the client knows it: owners
// are learnt per (stream or cache, shard) from not_leader answers, the
// owner section of forwarded acks, shard_owners and shard_moved hints,
// and a newer generation replaces an older hint. A redirect is followed
// with the original request (a subscribe keeps its start offset through
// every hop), at most Config.MaxRedirects hops per attempt and never to
// the same broker twice; it is never reported as an error and never
// spends the retry budget. Keyed publishes and keyed requests (publish_if,
// commit, state_get) are routed with felix.Routing over the stream's shard
// count (stream_shards, asked once and kept; a StreamShards call's answer
// is kept too).
//
// # Retries
//
// Failures are handled by retry class (felix.RetryClass): fatal answers
// are returned at once, typed (*BrokerError with its code,
// *CursorError, ...); retry and retry_after answers and failed dials
// are retried within Config.MaxAttempts, except that a call other than
// Subscribe and CacheWatch stops once every broker it may use failed a
// dial in this call (a dead cluster is reported within about one
// DialTimeout, not after the whole budget); a lost connection moves the
// call to another broker. A request that may have been applied — an
// outcome_unknown answer, or a connection lost after a publish was
// written — is not re-sent: it returns an *AmbiguousError
// (errors.Is(err, ErrAmbiguous)). PublishBatchMayDuplicate opts into
// re-sending (at-least-once: it may write a batch twice); a Producer
// re-sends without duplicates (idempotent producer: the same sequence
// until acknowledged, duplicates answered with their original offset, a
// refusal stops it).
//
// # Subscriptions
//
// A Subscription resumes by itself after a lost connection, a broker
// shutdown or a shard move: it resubscribes on the shard's owner at the
// offset after the last record it delivered, so nothing is skipped or
// repeated. It never ends quietly on a dead connection: it resumes exactly
// or returns an error (a trimmed cursor stays a typed error for the caller
// to decide; subscription_lagged resumes gaplessly with a NoticeLagged
// unless SubscribeOptions.LagAsError, and offsets missing between
// delivered records are reported as NoticeDropped). A Subscription reads
// ONE shard (SubscribeOptions.Shard, 0 by default); on a stream of several
// shards, shard 0 alone is announced with a NoticeOneShard logged at Warn.
// A ShardedSubscription (SubscribeSharded) reads every
// shard of a stream through one iterator, each shard following its owner;
// a lost shard is reported while the others keep delivering, and its
// Offsets map resumes every shard. Cache watches (Watch, ShardedWatch)
// resume the same way from the cache-log offset after the last change.
//
// # Publishing
//
// The zero PublishOptions publishes acknowledged: the call returns after
// the broker's answer, with the first record's offset. AckPerMessage and
// AckPerBatch behave the same from the client's side (one answer per
// batch covering every record of it); the mode is only carried to the
// broker. NoAck is the explicit fire-and-forget: the call returns once
// the batch is written, a refusal is never seen, Flush waits until the
// brokers read what was written, and Close drains.
//
// Mistakes are refused before anything is sent when the client can tell:
// a Topic or CacheRef of another tenant than Config.TenantID or with an
// empty name, or a name the protocol cannot carry (*NameError:
// ErrTenantMismatch, ErrEmptyName, ErrBadName), a request above the frame
// limit (*FrameLimitError, errors.Is ErrFrameTooLarge). A failed dial is
// a *DialError naming the address and what to check (ErrBadAddress,
// ErrNoAnswer, ErrCertUntrusted, ErrAuthRefused); several failed dials a
// *DialsError naming each. A ctx whose deadline ends a call during a dial
// gives those errors too, and they match context.DeadlineExceeded;
// cancelling ctx ends a call with ctx's error alone (errors.Is(err,
// context.Canceled)).
//
// # Errors
//
// Every error a call returns is classified with names of this package:
// the broker's answers (*BrokerError with its ErrorCode and RetryClass,
// *CursorError, *PublishRefusedError, *LaggedError, ...), the
// connection's (*DialError, *TransportError, ErrBrokerShutdown), the
// client's own (*AmbiguousError, *NameError, ErrClosed, ...) and api's
// (*CommitError). They are the lower layers' own types and values under
// client names, so errors.Is and errors.As match either name.
// docs/errors.md §10 says, for each, what happened and what to do;
// RetryClassOf says what the client's own decision table made of it.
//
// # Connection settings
//
// Config.CAFile (or CAPEM) is the certificate to trust; Config.TLS is a
// custom TLS configuration (client certificates, RootCAs), ServerName the
// name to verify, IdleTimeout and KeepAlive QUIC's timers. Config.Conn is
// the escape hatch for the rest (a quic.Config, connection hooks, a token
// provider, offered features): it is package conn's Config.
//
// # Caches and counters
//
// A cache holds two separate keyspaces: values (CachePut, CacheGet,
// CacheDelete, CachePutIf, CacheDeleteIf) and counters (CounterAdd,
// CounterGet). The same key names a value and a counter independently:
// CacheGet of a key only ever counted misses, and CounterAdd on a key
// holding a value succeeds and leaves the value alone.
//
// A TTL (CachePut's ttl, 0 for none) makes a value expire: reads miss it
// from then on, but the expiry is lazy and writes nothing to the cache
// log, so a watch sends no event for it. A watcher that must forget
// expired values uses the event's ExpiresAt. Watches (CacheWatch,
// CacheWatchSharded) see value writes and deletes, not counter adds.
//
// A counter add is sent once per call, by conn and by this package alike:
// neither re-sends it, because counter_add carries nothing that would let
// a broker drop a duplicate (a re-sent add counts twice: the protocol's
// adds are at-least-once for whoever re-sends). When its answer is lost
// the call returns an *AmbiguousError: the add may or may not have
// counted; read the counter to find out. Value puts, gets and deletes are
// re-sent after a lost connection (applying one twice has the same
// effect); conditional writes are not (*AmbiguousError).
//
// A cache may have several shards (CacheShards). A key lives on one
// shard, so a watch of one key (WatchOptions.Key) needs no more; a prefix
// watch (WatchOptions.Prefix) follows one shard (WatchOptions.Shard, 0 by
// default), and CacheWatchSharded watches a prefix on every shard, each
// resuming from its own cache-log offset (docs/limits.md bounds the
// caches and watch queues).
//
// # Queues, commits and inspection
//
// Group(ref) is a consumer group of one shard (a *Group): poll, ack,
// nack, extend, dead letters (list, redrive, discard), seek, describe and
// delete all go to the shard's leader, and Records is a consumer loop
// that settles every record it yields. Commit (one event plus state
// changes, validated on the client first), StateGet and PublishIf go to
// the leader of the shard the entity or routing key lands on; CachePutIf
// and CacheDeleteIf are compare-and-set cache writes. OffsetForTime and
// StreamRead read a shard on its leader; ShardOwners, Topology,
// CacheShards and StreamShards describe the cluster; ShardInspect and
// Subscriptions (a token granted node.view:cluster:*) describe the broker
// they reach — api.New(c.At(addr)) picks it. Each call is sent only when
// the broker it reaches advertised its feature (felix.ErrNotAdvertised
// otherwise, nothing sent). Reads are re-sent after a lost connection;
// writes and settling calls are not, once they may have been applied
// (*AmbiguousError).
//
// # Observability
//
// One mechanism per layer. Package conn's Hooks (set in Config.Conn.Hooks)
// observe connections, streams, frames and publishes; conn.JoinHooks
// attaches several sets. What only this client decides — redirects,
// retries, resumes, lag handling, dropped offsets, lost shards, connection
// changes and discoveries — is a Notice, declared here alone.
// Config.OnNotice receives every Notice, JoinNotices attaches several
// observers, and Config.Logger is LogNotices(logger) joined to them: the
// log/slog records are exactly the notices, so a healthy failover can be
// told from a flapping one. Client.Stats is a snapshot counted on the same
// path (connections, calls in flight, redirects, retries, resumes, drops,
// acknowledged and ambiguous publishes, transport bytes);
// examples/metrics adapts both layers to Prometheus (Collector.Hooks and
// Collector.Notices).
package client
