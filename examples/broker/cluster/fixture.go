package cluster

import (
	"encoding/json"

	"github.com/flxproto/felix/examples/broker/server"
)

// Fixture is the fixture description a conformance suite reads: upstream's
// format, with the member names of the client catalogue. Optional members
// are omitted when the fixture cannot produce that condition.
type Fixture struct {
	Addrs             []string `json:"addrs"`
	TenantID          string   `json:"tenant_id"`
	Namespace         string   `json:"namespace"`
	Token             string   `json:"token"`
	UnauthorizedToken string   `json:"unauthorized_token"`
	CAFile            string   `json:"ca_file"`
	DurableStream     string   `json:"durable_stream"`
	Cache             string   `json:"cache"`
	SingleShardCache  string   `json:"single_shard_cache"`
	MissingStream     string   `json:"missing_stream"`
	MovableStream     string   `json:"movable_stream,omitempty"`
	QuorumStream      string   `json:"quorum_stream,omitempty"`
	ControlURL        string   `json:"control_url,omitempty"`
	LinkAddr          string   `json:"link_addr,omitempty"`
	LinkStream        string   `json:"link_stream,omitempty"`
	Faults            []Fault  `json:"faults,omitempty"`
}

// Fault is one of the catalogue's fault scenarios with its step.
type Fault struct {
	ID           string `json:"id"`
	During       string `json:"during"`
	Fault        string `json:"fault"`
	AfterRecords int    `json:"after_records"`
	Records      int    `json:"records"`
	HoldMs       int    `json:"hold_ms"`
}

// Faults are the catalogue's fault scenarios (client-scenarios, version 1).
var Faults = []Fault{
	{"fault.publish_through_a_dropped_link", "publish", "drop", 3, 10, 8000},
	{"fault.publish_through_a_reset_link", "publish", "reset", 3, 10, 0},
	{"fault.publish_through_a_stalled_link", "publish", "stall", 3, 10, 2000},
	{"fault.subscription_through_a_dropped_link", "subscribe", "drop", 3, 10, 8000},
	{"fault.subscription_through_a_reset_link", "subscribe", "reset", 3, 10, 0},
	{"fault.subscription_through_a_stalled_link", "subscribe", "stall", 3, 10, 2000},
	{"fault.cache_through_a_reset_link", "cache", "reset", 2, 6, 0},
}

// Fixture returns the cluster's fixture description. Addrs are every
// node's address (node 0 first); control_url is set once ServeControl
// runs. unauthorized_token is Config.UnauthorizedToken ("" when the
// cluster has none).
func (c *Cluster) Fixture() Fixture {
	c.mu.Lock()
	ctrl := c.ctrlURL
	c.mu.Unlock()
	f := Fixture{
		Addrs: c.Addrs(), TenantID: c.cfg.Tenant, Namespace: c.cfg.Namespace, Token: c.cfg.Token,
		CAFile: c.caFile, DurableStream: DurableStream, Cache: Cache, SingleShardCache: SingleShardCache,
		MissingStream: MissingStream, MovableStream: MovableStream, QuorumStream: QuorumStream,
		ControlURL: ctrl, LinkAddr: c.link.Addr().String(), LinkStream: LinkStream,
		Faults: append([]Fault(nil), Faults...), UnauthorizedToken: c.cfg.UnauthorizedToken,
	}
	return f
}

// WriteFixture writes the fixture description to path as JSON, atomically.
func (c *Cluster) WriteFixture(path string) error {
	b, err := json.MarshalIndent(c.Fixture(), "", "  ")
	if err != nil {
		return err
	}
	return server.WriteFileAtomic(path, append(b, '\n'))
}
