package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The program runs clean, and says so for every check it makes.
func TestCacheProgram(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	require.NoError(t, run(ctx, &out))
	require.Equal(t, 12, strings.Count(out.String(), "\nok: "), out.String())
	require.Contains(t, out.String(), "no expiry and no counter events")
}
