package felixtest_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// appTest is the test of an application module outside this repository:
// it imports only felixtest and client, as an application would.
const appTest = `package app_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/flxproto/felix/client"
	"github.com/flxproto/felix/felixtest"
)

// The consumer sees every order once although the node that owns the
// orders' shard dies in the middle of the publishing.
func TestConsumerSurvivesOwnerKill(t *testing.T) {
	cl := felixtest.NewCluster(t, 3, felixtest.WithStream("shop", "orders", felixtest.Stream{}))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, cl.ClientConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	orders := cl.Topic("shop", "orders")
	sub, err := c.Subscribe(ctx, orders, client.SubscribeOptions{Start: client.Earliest})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	p, err := c.NewProducer(ctx) // re-sends without duplicates across the failover
	if err != nil {
		t.Fatal(err)
	}
	const n = 40
	for i := range n {
		if i == n/2 {
			if err := cl.Kill(cl.Owner(orders, 0)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := p.PublishBatch(ctx, orders, [][]byte{[]byte(fmt.Sprint("order-", i))}, client.PublishOptions{}); err != nil {
			t.Fatalf("order %d: %v", i, err)
		}
	}
	seen := make(map[string]int)
	for len(seen) < n {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("after %d orders: %v", len(seen), err)
		}
		if seen[string(ev.Payload)]++; seen[string(ev.Payload)] > 1 {
			t.Fatalf("%s seen twice", ev.Payload)
		}
	}
	if got := cl.Appended(orders, 0); got != n {
		t.Fatalf("%d records appended, want %d", got, n)
	}
}
`

// An application module outside this repository (a temporary module
// whose go.mod replaces github.com/flxproto/felix with this work tree)
// tests its consumer through a node kill with felixtest: the package is
// usable from outside, with nothing but its exported API. The module
// resolves against the local module cache (and GOPROXY when a module is
// missing from it), with the repository's go.sum.
func TestExternalModule(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	}
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	require.NoError(t, err)
	goLine := regexp.MustCompile(`(?m)^go \S+$`).Find(mod)
	require.NotNil(t, goLine)
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	require.NoError(t, err)

	dir := t.TempDir()
	gomod := "module example.com/app\n\n" + string(goLine) + "\n\n" +
		"require github.com/flxproto/felix v0.0.0\n\n" +
		"replace github.com/flxproto/felix => " + root + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "app_test.go"), []byte(appTest), 0o644))

	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "test", "-count=1", "-v", "-run", "TestConsumerSurvivesOwnerKill", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off", "GOSUMDB=off", "GOTOOLCHAIN=local")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	t.Logf("go test in %s:\n%s", dir, out.String())
	require.NoError(t, err)
	require.Contains(t, out.String(), "--- PASS: TestConsumerSurvivesOwnerKill")
	if m := regexp.MustCompile(`--- PASS: TestConsumerSurvivesOwnerKill \(([0-9.]+s)\)`).FindStringSubmatch(out.String()); m != nil {
		t.Logf("the application's test took %s", strings.TrimSpace(m[1]))
	}
}
