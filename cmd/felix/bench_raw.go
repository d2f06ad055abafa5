package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/conn/quicbench"
	"github.com/flxproto/felix/internal/broker/engine"
	"github.com/flxproto/felix/internal/broker/server"
)

// felix bench raw [-transport felix|raw|broker] [-owned] [-cold] [-gro=false] [-size N]
// [-records N] [-mb N]: the transport baseline (dispatched by runBench). One sender process writes the
// same encoded event batch again and again (with -cold, raw only: as many
// distinct copies of it, prepared before, so that its bytes come from
// memory as a broker's come from its log) to one receiver process over
// loopback, either through Felix (a conn server's event stream to a
// conn.Subscription read with Next, the default recycled buffer) or
// through raw quic-go (one unidirectional stream with conn's QUIC
// configuration, read frame by frame into one buffer: package
// conn/quicbench). Each side reports its own CPU time (getrusage, from the
// first byte to the last) per GB of record payload; the driver prints
// both beside records/s. -gro=false reads both processes' UDP sockets
// without UDP GRO (conn.Config.NoGRO, conn.ServerConfig.NoGRO; the
// reference broker's listener of -transport broker keeps its default).

// rawResult is one side's report, a JSON line on stdout.
type rawResult struct {
	Role    string  `json:"role"`
	Records int64   `json:"records"`
	Bytes   int64   `json:"bytes"`
	CPU     float64 `json:"cpu_s"`
	Wall    float64 `json:"wall_s"`
}

func runBenchRaw(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench raw", flag.ContinueOnError)
	fs.SetOutput(stderr)
	transport := fs.String("transport", "felix", "felix (conn event stream and Subscription), broker (the reference broker's send path, records published before, read from earliest) or raw (quic-go stream, no Felix)")
	size := fs.Int("size", 1024, "record size in bytes")
	records := fs.Int("records", 64, "records per event batch")
	mb := fs.Int("mb", 512, "MiB of record payload to send")
	role := fs.String("role", "", "internal: send or recv (the driver runs one process of each)")
	addr := fs.String("addr", "127.0.0.1:0", "send: listen address; recv: sender address")
	cert := fs.String("cert", "", "internal: recv: the sender's certificate, base64 DER")
	gro := fs.Bool("gro", true, "both sides read their UDP sockets with UDP GRO (Linux), as conn does by default; false: conn's NoGRO (the broker's listener of -transport broker keeps its default)")
	owned := fs.Bool("owned", false, "felix: subscribe with conn.PayloadsOwned (a fresh buffer per frame) instead of the default recycled buffer")
	cold := fs.Bool("cold", false, "raw: send distinct copies of the batch, -mb of them prepared before the run, instead of one batch from the CPU's caches (what a broker's log costs to read)")
	prof := fs.String("sendprofile", "", "write a CPU profile of the sender's send phase to this file")
	rprof := fs.String("recvprofile", "", "write a CPU profile of the receiver's receive phase to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	profiles["send"], profiles["recv"] = *prof, *rprof
	if *transport != "felix" && *transport != "raw" && *transport != "broker" {
		return fmt.Errorf("bench raw: -transport %q: felix, broker or raw", *transport)
	}
	if *cold && *transport != "raw" {
		return fmt.Errorf("bench raw: -cold is for -transport raw, not %q", *transport)
	}
	if *size < 1 || *records < 1 || *mb < 1 || *size**records > 8<<20 {
		return errors.New("bench raw: -size, -records and -mb must be positive, a batch at most 8 MiB")
	}
	batch := *size * *records
	frames := max(1, (*mb<<20)/batch)
	switch *role {
	case "send":
		return rawSend(ctx, stdout, *transport, *addr, *size, *records, frames, *gro, *cold)
	case "recv":
		pm := conn.PayloadsUntilNext
		if *owned {
			pm = conn.PayloadsOwned
		}
		return rawRecv(ctx, stdout, *transport, *addr, *cert, *size, *records, pm, *gro)
	case "":
	default:
		return fmt.Errorf("bench raw: -role %q: send or recv", *role)
	}
	return rawDrive(ctx, stdout, stderr, *transport, *size, *records, *mb, *owned, *gro, *cold)
}

// rawDrive runs the sender and the receiver as child processes and prints
// the table row.
func rawDrive(ctx context.Context, stdout, stderr io.Writer, transport string, size, records, mb int, owned, gro, cold bool) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	common := []string{"bench", "raw", "-sendprofile", profiles["send"], "-recvprofile", profiles["recv"], "-transport", transport, "-size", fmt.Sprint(size), "-records", fmt.Sprint(records), "-mb", fmt.Sprint(mb),
		fmt.Sprintf("-owned=%v", owned), fmt.Sprintf("-gro=%v", gro), fmt.Sprintf("-cold=%v", cold)}
	send := exec.CommandContext(ctx, self, append(common, "-role", "send")...)
	send.Stderr = stderr
	sin, err := send.StdinPipe()
	if err != nil {
		return err
	}
	defer sin.Close()
	sout, err := send.StdoutPipe()
	if err != nil {
		return err
	}
	if err := send.Start(); err != nil {
		return err
	}
	defer send.Wait()
	defer send.Process.Kill()
	sr := bufio.NewReader(sout)
	first, err := sr.ReadString('\n')
	if err != nil {
		return fmt.Errorf("bench raw: sender: %w", err)
	}
	a, c, _ := strings.Cut(strings.TrimSpace(first), " ")
	recv := exec.CommandContext(ctx, self, append(common, "-role", "recv", "-addr", a, "-cert", c)...)
	recv.Stderr = stderr
	rout, err := recv.Output()
	if err != nil {
		return fmt.Errorf("bench raw: receiver: %w", err)
	}
	var rr, sres rawResult
	if err := json.Unmarshal(rout, &rr); err != nil {
		return fmt.Errorf("bench raw: receiver said %q: %w", rout, err)
	}
	fmt.Fprintln(sin, "done") // the broker sender reports now
	sline, err := sr.ReadString('\n')
	if err != nil {
		return fmt.Errorf("bench raw: sender: %w", err)
	}
	if err := json.Unmarshal([]byte(sline), &sres); err != nil {
		return fmt.Errorf("bench raw: sender said %q: %w", sline, err)
	}
	gb := float64(rr.Bytes) / 1e9
	if owned {
		transport += "(owned)"
	}
	if !gro {
		transport += "(nogro)"
	}
	if cold {
		transport += "(cold)"
	}
	fmt.Fprintf(stdout, "transport=%s size=%d records/batch=%d  records/s=%.0f MB/s=%.1f  recv-cpu-s/GB=%.3f send-cpu-s/GB=%.3f  (records=%d bytes=%d recv-wall=%.2fs)\n",
		transport, size, records, float64(rr.Records)/rr.Wall, float64(rr.Bytes)/1e6/rr.Wall, rr.CPU/gb, sres.CPU/gb, rr.Records, rr.Bytes, rr.Wall)
	return nil
}

// profiles are -sendprofile and -recvprofile by role: the file of each
// side's CPU profile, from its first byte to its report.
var profiles = map[string]string{}

// startProfile starts role's CPU profile when asked; report stops it.
func startProfile(role string) {
	if profiles[role] == "" {
		return
	}
	if f, err := os.Create(profiles[role]); err == nil {
		_ = pprof.StartCPUProfile(f)
	}
}

func report(w io.Writer, role string, records, bytes int64, cpu0 time.Duration, t0 time.Time) error {
	if profiles[role] != "" {
		pprof.StopCPUProfile()
	}
	return json.NewEncoder(w).Encode(rawResult{Role: role, Records: records, Bytes: bytes,
		CPU: (cpuNow() - cpu0).Seconds(), Wall: time.Since(t0).Seconds()})
}

// rawSend listens, prints "ADDR CERT" and writes frames batches of
// records x size to the first subscriber (felix) or peer (raw), then
// prints its report.
func rawSend(ctx context.Context, stdout io.Writer, transport, addr string, size, records, frames int, gro, cold bool) error {
	payloads := make([][]byte, records)
	for i := range payloads {
		payloads[i] = make([]byte, size)
	}
	frame, err := felix.AppendEventBatch(nil, &felix.EventBatch{HasBaseOffset: true, Payloads: payloads}, felix.FlagEventBatchOffsets)
	if err != nil {
		return err
	}
	total := int64(frames) * int64(records)
	if transport == "broker" {
		return brokerSend(ctx, stdout, addr, payloads, frames, size)
	}
	if transport == "raw" {
		s, err := quicbench.Listen(addr, gro)
		if err != nil {
			return err
		}
		defer s.Close()
		send := [][]byte{frame}
		if cold { // one buffer, like a log, filled before the run
			all := make([]byte, 0, frames*len(frame))
			send = make([][]byte, frames)
			for i := range send {
				all = append(all, frame...)
				send[i] = all[len(all)-len(frame):]
			}
		}
		fmt.Fprintln(stdout, s.Addr(), base64.StdEncoding.EncodeToString(s.Cert()))
		startProfile("send")
		cpu0, t0 := cpuNow(), time.Now()
		if err := s.Send(ctx, send, frames); err != nil {
			return err
		}
		return report(stdout, "send", total, total*int64(size), cpu0, t0)
	}
	tc, _, err := conn.SelfSigned()
	if err != nil {
		return err
	}
	ln, err := conn.Listen(addr, &conn.ServerConfig{TLS: tc, Offer: felix.BrokerOffer{Flags: felix.KnownFlags, Features: felix.AllFeatures}, NoGRO: !gro})
	if err != nil {
		return err
	}
	defer ln.Close()
	fmt.Fprintln(stdout, ln.Addr(), base64.StdEncoding.EncodeToString(tc.Certificates[0].Certificate[0]))
	sc, err := ln.Accept(ctx)
	if err != nil {
		return err
	}
	// The receiver's first stream (its publish stream, authenticated in
	// Dial) stays open and idle; the subscribe comes on another.
	type sent struct {
		cpu0 time.Duration
		t0   time.Time
		err  error
	}
	done := make(chan sent, 1)
	go func() {
		for {
			st, err := sc.AcceptStream(ctx)
			if err != nil {
				return
			}
			go func() {
				req, err := st.ReadRequest(ctx)
				if err != nil {
					return
				}
				if _, ok := req.Message.(*felix.Subscribe); !ok {
					st.Close()
					return
				}
				es, err := st.OpenEventStream(ctx, 1)
				if err != nil {
					done <- sent{err: err}
					return
				}
				if err := st.WriteMessage(ctx, &felix.Subscribed{SubscriptionID: 1}); err != nil {
					done <- sent{err: err}
					return
				}
				st.Close()
				startProfile("send")
				cpu0, t0 := cpuNow(), time.Now()
				for range frames {
					if err := es.WriteEncoded(ctx, frame); err != nil {
						done <- sent{err: err}
						return
					}
				}
				done <- sent{cpu0, t0, es.Close()}
			}()
		}
	}()
	r := <-done
	if r.err != nil {
		return r.err
	}
	<-sc.Context().Done() // the receiver read the end and closed
	return report(stdout, "send", total, total*int64(size), r.cpu0, r.t0)
}

// rawRecv receives until the sender's stream ends and prints its report.
func rawRecv(ctx context.Context, stdout io.Writer, transport, addr, cert string, size, perBatch int, pm conn.PayloadMode, gro bool) error {
	der, err := base64.StdEncoding.DecodeString(cert)
	if err != nil {
		return err
	}
	if transport == "broker" {
		return brokerRecv(ctx, stdout, addr, der, gro)
	}
	if transport == "raw" {
		startProfile("recv")
		cpu0, t0 := cpuNow(), time.Now()
		// The raw receiver reads whole frames: records and record bytes
		// follow from the batch shape.
		frames, _, err := quicbench.Receive(ctx, addr, der, gro)
		if err != nil {
			return err
		}
		n := frames * int64(perBatch)
		return report(stdout, "recv", n, n*int64(size), cpu0, t0)
	}
	c0, err := x509.ParseCertificate(der)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AddCert(c0)
	c, err := conn.Dial(ctx, addr, &conn.Config{TLS: &tls.Config{RootCAs: pool, ServerName: "localhost"}, TenantID: "bench", Token: "bench", NoGRO: !gro})
	if err != nil {
		return err
	}
	defer c.Close()
	startProfile("recv")
	cpu0, t0 := cpuNow(), time.Now()
	sub, err := c.Subscribe(ctx, felix.Topic{TenantID: "bench", Namespace: "bench", Stream: "raw"}, conn.SubscribeOptions{Payloads: pm})
	if err != nil {
		return err
	}
	defer sub.Close()
	var records, bytes int64
	for {
		ev, err := sub.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		records++
		bytes += int64(len(ev.Payload))
	}
	return report(stdout, "recv", records, bytes, cpu0, t0)
}

// brokerStream is the stream felix bench raw -transport broker fills.
var brokerStream = felix.Topic{TenantID: server.DemoTenant, Namespace: "bench", Stream: "raw"}

// brokerSend starts the reference broker with room for every record,
// publishes frames batches into a durable stream (through the engine, no
// network), prints "ADDR CERT", and reports its CPU from then on (the
// send path: log reads, event batch encodes and writes) once the driver
// says the receiver is done (a line on stdin).
func brokerSend(ctx context.Context, stdout io.Writer, addr string, payloads [][]byte, frames, size int) error {
	var cfg server.Config
	cfg.Addr = addr
	cfg.Engine.DefaultStream.Durable = true
	cfg.Engine.DefaultStream.RetainRecords = frames*len(payloads) + 1
	cfg.Engine.DefaultStream.RetainBytes = -1
	cfg.Engine.MaxRetainBytes, cfg.Engine.MaxLogBytes = -1, -1
	srv, err := server.Listen(cfg)
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	defer func() { srv.Close(); <-done }()
	req := engine.PublishRequest{Topic: engine.Topic{Tenant: brokerStream.TenantID, Namespace: brokerStream.Namespace, Stream: brokerStream.Stream},
		Payloads: payloads, Publisher: "bench"}
	for range frames {
		if _, err := srv.Engine().Publish(req); err != nil {
			return err
		}
	}
	blk, _ := pem.Decode(srv.CertificatePEM())
	if blk == nil {
		return errors.New("bench raw: the broker's certificate is not PEM")
	}
	fmt.Fprintln(stdout, srv.Addr(), base64.StdEncoding.EncodeToString(blk.Bytes))
	startProfile("send")
	cpu0, t0 := cpuNow(), time.Now()
	bufio.NewReader(os.Stdin).ReadString('\n')
	total := int64(frames) * int64(len(payloads))
	return report(stdout, "send", total, total*int64(size), cpu0, t0)
}

// brokerRecv subscribes from the earliest record with the default
// subscription and reads every record brokerSend published.
func brokerRecv(ctx context.Context, stdout io.Writer, addr string, der []byte, gro bool) error {
	c0, err := x509.ParseCertificate(der)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AddCert(c0)
	c, err := conn.Dial(ctx, addr, &conn.Config{TLS: &tls.Config{RootCAs: pool}, TenantID: server.DemoTenant, Token: server.DemoToken, NoGRO: !gro})
	if err != nil {
		return err
	}
	defer c.Close()
	want := int64(0)
	startProfile("recv")
	cpu0, t0 := cpuNow(), time.Now()
	sub, err := c.Subscribe(ctx, brokerStream, conn.SubscribeOptions{Start: felix.StartPosition{Kind: felix.StartEarliest}})
	if err != nil {
		return err
	}
	defer sub.Close()
	if !sub.Info().LiveOffset.Set {
		return errors.New("bench raw: the broker sent no live_offset")
	}
	want = int64(sub.Info().LiveOffset.V)
	var records, bytes int64
	for records < want {
		ev, err := sub.Next(ctx)
		if err != nil {
			return err
		}
		records++
		bytes += int64(len(ev.Payload))
	}
	return report(stdout, "recv", records, bytes, cpu0, t0)
}
