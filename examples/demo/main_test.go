package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The demo's own checks all hold (the same run as `go run ./examples/demo`,
// smaller).
func TestDemo(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), &out, 5000, 50)
	t.Log(out.String())
	require.NoError(t, err)
	require.Contains(t, out.String(), "demo: all checks passed")
	require.NotContains(t, out.String(), "[FAIL]")
}
