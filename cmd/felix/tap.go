package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/conn/tap"
	"github.com/flxproto/felix/vectors"
)

func init() {
	register(command{
		name:    "tap",
		usage:   "tap [FLAGS]",
		summary: "relay clients to a broker over QUIC and log every frame both ways as vector JSON lines (auth tokens redacted)",
		run:     runTap,
		help:    tapHelp,
	})
}

// tapEnv are the environment variables tap reads.
var tapEnv = [][2]string{
	{"FELIX_ADDR", "default of -addr: the broker's UDP address"},
	{"FELIX_CERT", "default of -cert: PEM certificate the broker must present"},
	{"SSLKEYLOGFILE", "append the TLS secrets of both legs (NSS key log format) to this file; off when unset (warns)"},
}

// redactedToken replaces auth tokens in the log.
const redactedToken = "REDACTED"

type tapFlags struct {
	listen, addr, cert, serverName, certOut, addrOut, out string
	dirs, kinds                                           string
}

func (f *tapFlags) flagSet() *flag.FlagSet {
	fs := newFlagSet("tap")
	fs.StringVar(&f.listen, "listen", "127.0.0.1:7448", "UDP address clients connect to (port 0: any free port, see -addr-out)")
	fs.StringVar(&f.addr, "addr", envOr("FELIX_ADDR", "127.0.0.1:7447"), "the broker's UDP address (env FELIX_ADDR)")
	fs.StringVar(&f.cert, "cert", envOr("FELIX_CERT", ""), "PEM certificate the broker must present, e.g. its -cert-out file, read at each connection (env FELIX_CERT; default: the system roots)")
	fs.StringVar(&f.serverName, "server-name", "localhost", "TLS server name the broker's certificate must carry")
	fs.StringVar(&f.certOut, "cert-out", "", "write the tap's own (fresh, self-signed) certificate as PEM to this file: clients trust it instead of the broker's")
	fs.StringVar(&f.addrOut, "addr-out", "", "write the bound UDP address to this file once listening")
	fs.StringVar(&f.out, "o", "", "append the log to this file instead of stdout")
	fs.StringVar(&f.dirs, "dir", "both", "directions to log: c2b (client to broker), b2c, or both")
	fs.StringVar(&f.kinds, "kind", "", "log only these comma-separated kinds (json_message, binary_publish_batch, binary_acked_publish_batch, binary_publish_ack, binary_event_batch, invalid) or JSON message types (auth, publish, subscribe, ...); empty: all")
	return fs
}

func tapHelp(_ context.Context, w io.Writer) {
	var f tapFlags
	fs := f.flagSet()
	fmt.Fprintln(w, "usage: felix tap [FLAGS]")
	fmt.Fprintln(w, "  A QUIC relay between clients and a broker, for protocol debugging. Clients connect to")
	fmt.Fprintln(w, "  -listen and trust the tap's certificate (-cert-out); the tap connects to the broker at -addr,")
	fmt.Fprintln(w, "  verifying its certificate (-cert), pairs their streams 1:1 and copies the bytes unchanged.")
	fmt.Fprintln(w, "  Every frame, both directions, is one JSON line: the members of `felix decode` (vectors/FORMAT.md)")
	fmt.Fprintln(w, "  plus time, conn, stream_id (QUIC), uni and dir. Auth tokens are replaced by \""+redactedToken+"\" in the log (the")
	fmt.Fprintln(w, "  line's frame_hex is then the redacted frame; member \"redacted\" says so). Runs until interrupted.")
	fmt.Fprintln(w, "flags:")
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	fmt.Fprintln(w, "environment (tap reads only these):")
	for _, e := range tapEnv {
		fmt.Fprintf(w, "  %-16s %s\n", e[0], e[1])
	}
}

func runTap(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	var f tapFlags
	fs := f.flagSet()
	if err := parseFlags(fs, args); err != nil {
		var hr helpRequest
		if errors.As(err, &hr) {
			return flag.ErrHelp // tapHelp lists the tap's own environment
		}
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	filter, err := newTapFilter(f.dirs, f.kinds)
	if err != nil {
		return err
	}
	out := stdout
	if f.out != "" {
		file, err := os.OpenFile(f.out, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return fmt.Errorf("-o: %v", err)
		}
		defer file.Close()
		out = file
	}
	kl, err := keyLogWriter(stderr)
	if err != nil {
		return err
	}
	own, _, err := conn.SelfSigned()
	if err != nil {
		return err
	}
	lw := &tapLog{w: bufio.NewWriter(out), filter: filter, max: felix.DefaultMaxFrameBytes}
	upTLS := &tls.Config{ServerName: f.serverName}
	if f.cert != "" {
		verifyAgainstFile(upTLS, f.cert)
	}
	r, err := tap.Listen(f.listen, &tap.Config{TLS: own, Upstream: f.addr, UpstreamTLS: upTLS,
		ServerName: f.serverName, OnFrame: lw.frame, KeyLogWriter: kl,
		Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		return fmt.Errorf("listen %s: %w", f.listen, err)
	}
	if f.certOut != "" {
		der := own.Certificates[0].Certificate[0]
		if err := writeAtomic(f.certOut, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})); err != nil {
			r.Close()
			return fmt.Errorf("-cert-out: %v", err)
		}
	}
	if f.addrOut != "" {
		if err := writeAtomic(f.addrOut, []byte(r.Addr().String()+"\n")); err != nil {
			r.Close()
			return fmt.Errorf("-addr-out: %v", err)
		}
	}
	fmt.Fprintf(stderr, "felix tap: relaying %s -> %s (auth tokens redacted in the log)\n", r.Addr(), f.addr)
	<-ctx.Done()
	err = r.Close() // every frame seen is logged by then
	if ferr := lw.flush(); err == nil {
		err = ferr
	}
	if err != nil {
		return err
	}
	return interruptedf("%d frame(s) logged", lw.lines)
}

// verifyAgainstFile makes c verify the broker's certificate chain and name
// against the PEM file at path, read at each handshake (so the tap may start
// before the broker wrote it, and follows a rotated certificate).
func verifyAgainstFile(c *tls.Config, path string) {
	name := c.ServerName
	// The standard verification is replaced by the same verification
	// against a pool loaded now: InsecureSkipVerify only hands the check
	// over to VerifyConnection, which refuses what does not verify.
	c.InsecureSkipVerify = true
	c.VerifyConnection = func(cs tls.ConnectionState) error {
		pool, err := conn.CertPoolFromFile(path)
		if err != nil {
			return fmt.Errorf("-cert: %w", err)
		}
		if len(cs.PeerCertificates) == 0 {
			return errors.New("broker presented no certificate")
		}
		inter := x509.NewCertPool()
		for _, ic := range cs.PeerCertificates[1:] {
			inter.AddCert(ic)
		}
		_, err = cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, DNSName: name})
		return err
	}
}

// writeAtomic writes data beside path and renames it into place.
func writeAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	if err := errors.Join(werr, f.Close(), os.Chmod(f.Name(), 0o644)); err != nil {
		os.Remove(f.Name())
		return err
	}
	return os.Rename(f.Name(), path)
}

// tapFilter selects the frames logged.
type tapFilter struct {
	dir   tap.Direction   // 0: both
	kinds map[string]bool // nil: all
}

func newTapFilter(dirs, kinds string) (tapFilter, error) {
	var f tapFilter
	switch dirs {
	case "both", "":
	case "c2b":
		f.dir = tap.ClientToBroker
	case "b2c":
		f.dir = tap.BrokerToClient
	default:
		return f, usagef("-dir %q: want c2b, b2c or both", dirs)
	}
	for k := range strings.SplitSeq(kinds, ",") {
		if k = strings.TrimSpace(k); k != "" {
			if f.kinds == nil {
				f.kinds = map[string]bool{}
			}
			f.kinds[k] = true
		}
	}
	return f, nil
}

// tapLog writes one JSON line per relayed frame.
type tapLog struct {
	mu     sync.Mutex
	w      *bufio.Writer
	filter tapFilter
	max    uint32
	lines  int
	seq    map[[2]uint64]int // (conn, stream) → frames seen
	err    error
}

func (l *tapLog) frame(f tap.Frame) {
	if l.filter.dir != 0 && f.Dir != l.filter.dir {
		return
	}
	members, kind, msgType := l.describe(f)
	if l.filter.kinds != nil && !l.filter.kinds[kind] && !l.filter.kinds[msgType] {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seq == nil {
		l.seq = map[[2]uint64]int{}
	}
	key := [2]uint64{f.Conn, uint64(f.StreamID)}
	n := l.seq[key]
	l.seq[key] = n + 1
	head := []vectors.Member{
		{Name: "name", Value: fmt.Sprintf("c%d-s%d-%s-%d", f.Conn, f.StreamID, f.Dir, n)},
		{Name: "time", Value: f.Time.UTC().Format(time.RFC3339Nano)},
		{Name: "conn", Value: f.Conn},
		{Name: "stream_id", Value: f.StreamID},
		{Name: "uni", Value: f.Uni},
		{Name: "dir", Value: f.Dir.String()},
	}
	line, err := jsonLine(append(head, members...))
	if err == nil {
		_, err = l.w.Write(line)
	}
	if err == nil {
		err = l.w.Flush() // a line is visible as soon as it is logged
	}
	if err != nil && l.err == nil {
		l.err = err
	}
	l.lines++
}

func (l *tapLog) flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.w.Flush(); l.err == nil {
		l.err = err
	}
	return l.err
}

// describe returns the `felix decode` members of f (without "name"), its
// kind and its JSON message type ("" for binary frames). An auth frame's
// token is replaced first.
func (l *tapLog) describe(f tap.Frame) ([]vectors.Member, string, string) {
	if f.Err != nil {
		return []vectors.Member{{Name: "kind", Value: "invalid"}, {Name: "layout", Value: "frame"},
			{Name: "error", Value: errorClass(f.Err)}, {Name: "note", Value: "the rest of this direction is relayed but not logged: " + f.Err.Error()}}, "invalid", ""
	}
	frame, msgType, redacted := redact(f.Frame, l.max)
	desc, err := describe(frame, l.max, false)
	if desc == nil {
		desc = []vectors.Member{{Name: "kind", Value: "invalid"}, {Name: "note", Value: err.Error()}}
	}
	kind := ""
	out := make([]vectors.Member, 0, len(desc)+1)
	for _, m := range desc {
		switch m.Name {
		case "name":
			continue
		case "kind":
			kind, _ = m.Value.(string)
		}
		out = append(out, m)
	}
	if redacted {
		out = append(out, vectors.Member{Name: "redacted", Value: []string{"token"}})
	}
	return out, kind, msgType
}

// redact returns frame with an auth message's token replaced (a new frame),
// the JSON message type of the frame and whether it was redacted.
func redact(frame []byte, max uint32) ([]byte, string, bool) {
	fr, err := felix.DecodeFrame(frame, max)
	if err != nil || fr.Flags != 0 {
		return frame, "", false
	}
	m, err := felix.DecodeMessage(fr.Payload)
	if err != nil {
		return frame, "", false
	}
	a, ok := m.(*felix.Auth)
	if !ok {
		return frame, m.MessageType(), false
	}
	c := *a
	c.Token = redactedToken
	b, err := felix.AppendMessageFrame(nil, &c)
	if err != nil {
		// Never log the original: say it could not be redacted.
		b, _ = felix.AppendMessageFrame(nil, &felix.Auth{TenantID: a.TenantID, Token: redactedToken})
	}
	return b, "auth", true
}

func errorClass(err error) string {
	if c := felix.ErrorClass(err); c != "" {
		return c
	}
	return "unclassified"
}

// jsonLine encodes members as one compact JSON object and a newline.
func jsonLine(members []vectors.Member) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			buf.WriteByte(',')
		}
		key, err := json.Marshal(m.Name)
		if err != nil {
			return nil, err
		}
		buf.Write(key)
		buf.WriteByte(':')
		var val bytes.Buffer
		enc := json.NewEncoder(&val)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(m.Value); err != nil {
			return nil, fmt.Errorf("member %s: %v", m.Name, err)
		}
		buf.Write(bytes.TrimRight(val.Bytes(), "\n"))
	}
	buf.WriteString("}\n")
	return buf.Bytes(), nil
}
