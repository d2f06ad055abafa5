package conn

import "context"

type connCtxKey struct{}

// ConnFromContext returns the connection whose stream an Authenticator is
// asked about (its context carries it), so that a broker can account
// failed auths per connection and per source address.
func ConnFromContext(ctx context.Context) (*ServerConn, bool) {
	c, ok := ctx.Value(connCtxKey{}).(*ServerConn)
	return c, ok
}
