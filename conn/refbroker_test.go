package conn_test

import "github.com/flxproto/felix/internal/reftest"

// The brokers of the end-to-end tests (internal/reftest, shared with the
// other packages' tests).
var (
	testCtx   = reftest.Ctx
	startRef  = reftest.StartRef
	dialRef   = reftest.DialRef
	startBare = reftest.StartBare
)
