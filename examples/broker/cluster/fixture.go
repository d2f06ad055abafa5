package cluster

import (
	"encoding/json"

	"github.com/flxproto/felix/conformance"
	"github.com/flxproto/felix/examples/broker/server"
)

// Fixture returns the cluster's fixture description (upstream's format):
// every node's address (node 0 first), the fixture's names and
// credentials, the CA file, the interposer's address and the catalogue's
// fault steps. control_url is set once ServeControl runs;
// unauthorized_token is Config.UnauthorizedToken (a token without
// permissions, DefaultUnauthorizedToken unless configured).
func (c *Cluster) Fixture() conformance.Fixture {
	c.mu.Lock()
	ctrl := c.ctrlURL
	c.mu.Unlock()
	return conformance.Fixture{
		Addrs: c.Addrs(), TenantID: c.cfg.Tenant, Namespace: c.cfg.Namespace, Token: c.cfg.Token,
		UnauthorizedToken: c.cfg.UnauthorizedToken, CAFile: c.caFile,
		DurableStream: DurableStream, Cache: Cache, SingleShardCache: SingleShardCache, MissingStream: MissingStream,
		MovableStream: MovableStream, QuorumStream: QuorumStream, ControlURL: ctrl,
		LinkAddr: c.link.Addr().String(), LinkStream: LinkStream, Faults: conformance.Faults(),
	}
}

// WriteFixture writes the fixture description to path as JSON; the file
// appears whole (written beside path, then renamed).
func (c *Cluster) WriteFixture(path string) error {
	b, err := json.MarshalIndent(c.Fixture(), "", "  ")
	if err != nil {
		return err
	}
	return server.WriteFileAtomic(path, append(b, '\n'))
}
