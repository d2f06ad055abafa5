package cluster

import (
	"encoding/json"

	"github.com/flxproto/felix/conformance"
	"github.com/flxproto/felix/internal/broker/server"
)

// Fixture returns the cluster's fixture description (upstream's format):
// every node's address (node 0 first), the fixture's names and
// credentials, the CA file, the interposer's address and the catalogue's
// fault steps. control_url and control_token (ControlToken) are set once
// ServeControl runs;
// unauthorized_token is Config.UnauthorizedToken (a token without
// permissions, DefaultUnauthorizedToken unless configured).
func (c *Cluster) Fixture() conformance.Fixture {
	c.mu.Lock()
	ctrl, ctrlToken := c.ctrlURL, ""
	c.mu.Unlock()
	if ctrl != "" {
		ctrlToken = c.ctlToken
	}
	return conformance.Fixture{
		Addrs: c.Addrs(), TenantID: c.cfg.Tenant, Namespace: c.cfg.Namespace, Token: c.cfg.Token,
		UnauthorizedToken: c.cfg.UnauthorizedToken, CAFile: c.caFile,
		DurableStream: DurableStream, Cache: Cache, SingleShardCache: SingleShardCache, MissingStream: MissingStream,
		MovableStream: MovableStream, QuorumStream: QuorumStream, ControlURL: ctrl, ControlToken: ctrlToken,
		LinkAddr: c.link.Addr().String(), LinkStream: LinkStream, Faults: conformance.Faults(),
	}
}

// WriteFixture writes the fixture description to path as JSON; the file
// appears whole (written beside path, then renamed) and only its owner
// may read it (mode 0600): it holds the fixture's tokens and the control
// token.
func (c *Cluster) WriteFixture(path string) error {
	b, err := json.MarshalIndent(c.Fixture(), "", "  ")
	if err != nil {
		return err
	}
	return server.WriteSecretFileAtomic(path, append(b, '\n'))
}
