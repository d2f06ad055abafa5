package felixtest_test

// The example of docs/testing.md, run by go test; TestTestingDocExample
// checks that the document shows this code.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/client"
	"github.com/flxproto/felix/felixtest"
)

// consume is the application code under test: it reads orders until it has
// seen n different ones and returns how often it saw each.
func consume(ctx context.Context, sub *client.Subscription, n int) (map[string]int, error) {
	seen := make(map[string]int)
	for len(seen) < n {
		ev, err := sub.Next(ctx)
		if err != nil {
			return seen, err
		}
		seen[string(ev.Payload)]++
	}
	return seen, nil
}

func TestConsumeThroughFaults(t *testing.T) {
	tests := []struct {
		name  string
		fault func(t *testing.T, cl *felixtest.Cluster, orders felix.Topic)
	}{
		{"no fault", func(*testing.T, *felixtest.Cluster, felix.Topic) {}},
		{"owner killed", func(t *testing.T, cl *felixtest.Cluster, orders felix.Topic) {
			if err := cl.Kill(cl.Owner(orders, 0)); err != nil { // returns once the shard has moved
				t.Fatal(err)
			}
		}},
		{"owner drained", func(t *testing.T, cl *felixtest.Cluster, orders felix.Topic) {
			if err := cl.Drain(cl.Owner(orders, 0)); err != nil {
				t.Fatal(err)
			}
		}},
		{"retry_after", func(t *testing.T, cl *felixtest.Cluster, orders felix.Topic) {
			var once atomic.Bool
			cl.Intercept(func(r felixtest.Request) *felixtest.Answer {
				if r.Topic == orders && once.CompareAndSwap(false, true) {
					return felixtest.RetryAfter(50 * time.Millisecond)
				}
				return nil
			})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cl := felixtest.NewCluster(t, 3)
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
			p, err := c.NewProducer(ctx) // no duplicates when a batch is re-sent
			if err != nil {
				t.Fatal(err)
			}
			const n = 10
			for i := range n {
				if i == n/2 {
					tt.fault(t, cl, orders)
				}
				if _, err := p.PublishBatch(ctx, orders, [][]byte{[]byte(fmt.Sprint("order-", i))}, client.PublishOptions{}); err != nil {
					t.Fatalf("order %d: %v", i, err)
				}
			}
			seen, err := consume(ctx, sub, n)
			if err != nil {
				t.Fatal(err)
			}
			for order, k := range seen {
				if k != 1 {
					t.Errorf("%s seen %d times", order, k)
				}
			}
		})
	}
}

// TestTestingDocExample: docs/testing.md §4 shows the code above, from
// consume on, so that the page's example cannot rot.
func TestTestingDocExample(t *testing.T) {
	doc, err := os.ReadFile(filepath.FromSlash("../docs/testing.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "## 4.")
	if !ok {
		t.Fatal("docs/testing.md has no section 4")
	}
	_, block, ok := strings.Cut(section, "```go\n")
	if !ok {
		t.Fatal("docs/testing.md §4 has no Go block")
	}
	block, _, _ = strings.Cut(block, "```")
	src, err := os.ReadFile("doc_example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, code, ok := strings.Cut(string(src), "// consume is the application")
	if !ok {
		t.Fatal("consume not found")
	}
	code, _, _ = strings.Cut("// consume is the application"+code, "\n// TestTestingDocExample")
	if strings.TrimSpace(block) != strings.TrimSpace(code) {
		t.Fatalf("docs/testing.md §4 differs from doc_example_test.go:\n%s", block)
	}
}
