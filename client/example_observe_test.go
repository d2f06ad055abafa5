package client_test

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/flxproto/felix/client"
)

// ExampleJoinNotices attaches a metrics observer and a structured logger
// to one client: both see every Notice, in order. Config.Logger does the
// same as LogNotices joined last; Client.Stats counts the notices too.
func ExampleJoinNotices() {
	redirects := 0
	count := func(ev client.Notice) {
		if ev.Kind == client.NoticeRedirect {
			redirects++
		}
	}
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{} // keep the output stable
			}
			return a
		},
	}))
	onNotice := client.JoinNotices(count, client.LogNotices(logger))

	// What the client does on a not_leader answer:
	onNotice(client.Notice{Kind: client.NoticeRedirect, Op: "publish", Addr: "10.0.0.1:7443", Target: "10.0.0.2:7443", Attempt: 1})
	fmt.Println("redirects:", redirects)
	// Output:
	// level=INFO msg="felix client" event=redirect op=publish addr=10.0.0.1:7443 target=10.0.0.2:7443 attempt=1
	// redirects: 1
}
