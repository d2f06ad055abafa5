// Package client is the Felix client to use: a cluster-aware client built
// on conn.Client, the single-connection building block (one QUIC
// connection to one broker, no re-dial, typed errors passed through).
//
// A Client starts from one or more seed addresses and learns the cluster
// from them (topology, auth_ok's listener_ports, owner hints), keeps one
// connection per broker it talks to, and heals them: a lost connection is
// re-dialled on demand, another broker first when the broker failed, with
// capped exponential backoff and full jitter (never shorter than a
// broker's retry_after_ms). Connections use upstream's 6 s idle timeout
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
// spends the retry budget. Keyed publishes are routed with felix.Routing
// over the stream's shard count (stream_shards, cached).
//
// # Retries
//
// Failures are handled by retry class (felix.RetryClass): fatal answers
// are returned at once, typed (*conn.BrokerError with its code,
// *conn.CursorError, ...); retry and retry_after answers and failed dials
// are retried within Config.MaxAttempts; a lost connection moves the call
// to another broker. A request that may have been applied — an
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
// delivered records are reported as NoticeDropped). A ShardedSubscription reads every
// shard of a stream through one iterator, each shard following its owner;
// a lost shard is reported while the others keep delivering, and its
// Offsets map resumes every shard. Cache watches (Watch) resume the same
// way from the cache-log offset after the last change.
//
// # Queues, commits and inspection
//
// Group is a consumer group of one shard: poll, ack, nack, extend, dead
// letters (list, redrive, discard), seek, describe and delete all go to
// the shard's leader, and Group.Records is a consumer loop that settles
// every record it yields. Commit (one event plus state changes, validated
// on the client first), StateGet and PublishIf go to the leader of the
// shard the entity or routing key lands on; CachePutIf and CacheDeleteIf
// are compare-and-set cache writes. OffsetForTime and StreamRead read a
// shard on its leader; ShardOwners, Topology, CacheShards and
// StreamShards describe the cluster; ShardInspect and Subscriptions (a
// token granted node.view:cluster:*) describe one broker; RawRequest sends
// any message. Each call is sent only when the broker it reaches
// advertised its feature (conn.ErrNotAdvertised otherwise, nothing sent).
// Reads are re-sent after a lost connection; writes and settling calls
// are not, once they may have been applied (*AmbiguousError).
//
// # Observability
//
// Config.OnNotice receives a Notice for every connection state change,
// discovery, redirect, retry, resume and lost shard, and Config.Logger
// gets the same as structured log/slog records, so a healthy failover can
// be told from a flapping one.
package client
