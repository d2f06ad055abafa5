package conn_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"log"
	"slices"
	"strings"
	"time"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
)

// ExampleConfig_keyLogWriter writes a connection's TLS secrets in NSS key
// log format, the file Wireshark and tshark read to decrypt a capture of
// the QUIC traffic (programs usually open it with KeyLogFromEnv, from
// SSLKEYLOGFILE).
func ExampleConfig_keyLogWriter() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srvTLS, roots, err := conn.SelfSigned()
	if err != nil {
		log.Fatal(err)
	}
	ln, err := conn.Listen("127.0.0.1:0", &conn.ServerConfig{TLS: srvTLS, Offer: felix.BrokerOffer{Flags: felix.KnownFlags}})
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	go exampleBroker(ctx, ln)

	var keys bytes.Buffer
	c, err := conn.Dial(ctx, ln.Addr().String(), &conn.Config{TLS: &tls.Config{RootCAs: roots}, TenantID: "t1", Token: "secret",
		KeyLogWriter: &keys})
	if err != nil {
		log.Fatal(err)
	}
	c.Close()
	var labels []string
	for line := range strings.Lines(keys.String()) {
		labels = append(labels, strings.Fields(line)[0])
	}
	slices.Sort(labels)
	for _, l := range labels {
		fmt.Println(l)
	}
	// Output:
	// CLIENT_HANDSHAKE_TRAFFIC_SECRET
	// CLIENT_TRAFFIC_SECRET_0
	// SERVER_HANDSHAKE_TRAFFIC_SECRET
	// SERVER_TRAFFIC_SECRET_0
}
