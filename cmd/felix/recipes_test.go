package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flxproto/felix/internal/broker/cluster"
	"github.com/flxproto/felix/internal/broker/engine"
	"github.com/flxproto/felix/internal/broker/server"
	"github.com/stretchr/testify/require"
)

// The recipes of README.md and docs/*.md are tests: every felix command
// line of their shell blocks ("go run ./cmd/felix ..." or "felix ...") is
// run, in the order written, against brokers this test starts: a
// standalone broker for the lines that trust broker.pem, a three-node
// reference cluster for cluster.pem / ca.pem, the line's own felix tap for
// tap.pem. Addresses, certificate files and output files are mapped to
// the test's; bench runs are shortened (-duration 1s, -n 500). A line's
// comment states what it must do: "exit status N" (else 0), and
// "prints X" the exact output. Commands that run until interrupted (sub
// or cache watch without -n, tap, bench sub, a line ending in "&") run in
// the background until their block ends, then are interrupted and must
// exit 0. Lines of other programs (the broker command, which the test
// replaces, curl, dumpcap, tshark, go test, shell built-ins) are listed
// with -v and not run.
func TestDocRecipesRun(t *testing.T) {
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	files := []string{filepath.Join(root, "README.md")}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	files = append(files, docs...)

	env := newRecipeEnv(t)
	t.Chdir(root) // paths in the recipes are relative to the repository
	ran := 0
	for _, f := range files {
		for _, b := range shellBlocks(t, f) {
			ran += env.runBlock(t, b)
		}
	}
	require.Greater(t, ran, 15, "felix lines found and run")
}

// recipeBlock is a fenced shell block of a document.
type recipeBlock struct {
	file  string
	lines []recipeLine
}

type recipeLine struct {
	at   string // file:line
	text string
}

var fence = regexp.MustCompile("^\\s*```\\s*([a-z]*)\\s*$")

// shellBlocks returns the fenced blocks of path labelled sh, bash or
// unlabelled, with "\" continuations joined.
func shellBlocks(t *testing.T, path string) []recipeBlock {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var out []recipeBlock
	var cur *recipeBlock
	var cont string
	sc := bufio.NewScanner(bytes.NewReader(data))
	n := 0
	for sc.Scan() {
		n++
		l := sc.Text()
		if m := fence.FindStringSubmatch(l); m != nil {
			if cur != nil {
				out = append(out, *cur)
				cur = nil
				continue
			}
			if m[1] == "" || m[1] == "sh" || m[1] == "bash" {
				cur = &recipeBlock{file: filepath.Base(path)}
			} else {
				cur = &recipeBlock{file: "skip"}
			}
			continue
		}
		if cur == nil || cur.file == "skip" {
			continue
		}
		l = strings.TrimSpace(l)
		if strings.HasSuffix(l, "\\") {
			cont += strings.TrimSuffix(l, "\\") + " "
			continue
		}
		cur.lines = append(cur.lines, recipeLine{at: filepath.Base(path) + ":" + strconv.Itoa(n), text: cont + l})
		cont = ""
	}
	return out
}

// recipeEnv holds the brokers the recipes run against.
type recipeEnv struct {
	dir                    string
	brokerAddr, brokerCert string
	cl                     *cluster.Cluster
	clusterCert            string
}

func newRecipeEnv(t *testing.T) *recipeEnv {
	e := &recipeEnv{dir: t.TempDir()}
	srv, _ := listenTestBroker(t, server.Config{Engine: engine.Config{DefaultStream: engine.StreamConfig{Durable: true}}})
	e.brokerAddr = srv.Addr().String()
	e.brokerCert = filepath.Join(e.dir, "broker.pem")
	require.NoError(t, srv.WriteCertificate(e.brokerCert))
	// As the broker command's -nodes: durable streams created on first use.
	cl, err := cluster.Start(context.Background(), cluster.Config{Nodes: 3, Engine: engine.Config{DefaultStream: engine.StreamConfig{Durable: true}}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, cl.Close()) })
	e.cl = cl
	e.clusterCert = filepath.Join(e.dir, "cluster.pem")
	require.NoError(t, os.WriteFile(e.clusterCert, cl.CertificatePEM(), 0o600))
	// Defaults of the commands that name no address or certificate.
	t.Setenv("FELIX_ADDR", e.brokerAddr)
	t.Setenv("FELIX_CERT", e.brokerCert)
	return e
}

// background is a command left running until its block ends.
type background struct {
	at     string
	cancel context.CancelFunc
	code   chan int
	stderr *syncWriter
}

// blockState is what one block's lines started: its tap's address and
// certificate, and the commands running in the background.
type blockState struct {
	tapAddr, tapCert string
	bg               []background
}

// runBlock runs the felix lines of b and returns how many ran.
func (e *recipeEnv) runBlock(t *testing.T, b recipeBlock) int {
	st := &blockState{}
	defer func() {
		for _, bg := range st.bg {
			bg.cancel()
			select {
			case code := <-bg.code:
				require.Equal(t, 0, code, "%s: interrupted: %s", bg.at, bg.stderr.String())
			case <-time.After(30 * time.Second):
				t.Fatalf("%s: did not end on the interrupt", bg.at)
			}
		}
	}()
	ran := 0
	for _, l := range b.lines {
		if e.runLine(t, st, l) {
			ran++
		}
	}
	return ran
}

var (
	exitStatus = regexp.MustCompile(`exit status (\d)`)
	prints     = regexp.MustCompile(`^prints (.*)$`)
	catAddr    = regexp.MustCompile(`"?\$\(cat [a-z.]+\.addr\)"?`)
)

// runLine runs one line when it is a felix command; false when it is not.
func (e *recipeEnv) runLine(t *testing.T, st *blockState, l recipeLine) bool {
	text, comment := splitComment(l.text)
	words := shellWords(catAddr.ReplaceAllString(text, "CLUSTER_ADDR"))
	var stdin string
	if len(words) > 2 && words[0] == "echo" {
		if i := indexOf(words, "|"); i > 0 {
			stdin = strings.Join(words[1:i], " ") + "\n"
			words = words[i+1:]
		}
	}
	bgWanted := false
	if len(words) > 0 && words[len(words)-1] == "&" {
		bgWanted, words = true, words[:len(words)-1]
	}
	for len(words) > 0 && strings.Contains(words[0], "=") && !strings.HasPrefix(words[0], "-") {
		k, _, _ := strings.Cut(words[0], "=")
		if k == "SSLKEYLOGFILE" {
			t.Setenv(k, filepath.Join(e.dir, "keys.log"))
		}
		words = words[1:]
	}
	switch {
	case len(words) >= 3 && words[0] == "go" && words[1] == "run" && words[2] == "./cmd/felix":
		words = words[3:]
	case len(words) >= 1 && words[0] == "felix":
		words = words[1:]
	default:
		if text != "" {
			t.Logf("%s: not a felix line, not run: %s", l.at, text)
		}
		return false
	}
	args, ok := e.mapArgs(t, st, words)
	if !ok {
		t.Logf("%s: needs what no recipe of this test provides, not run: %s", l.at, text)
		return false
	}
	runsUntilInterrupted := bgWanted || words[0] == "tap" ||
		(words[0] == "sub" && indexOf(args, "-n") < 0) ||
		(len(words) > 1 && words[0] == "cache" && words[1] == "watch" && indexOf(args, "-n") < 0) ||
		(len(words) > 1 && words[0] == "bench" && words[1] == "sub")
	if runsUntilInterrupted {
		ctx, cancel := context.WithCancel(context.Background())
		bg := background{at: l.at, cancel: cancel, code: make(chan int, 1), stderr: &syncWriter{}}
		go func() { bg.code <- run(ctx, args, strings.NewReader(stdin), &syncWriter{}, bg.stderr) }()
		st.bg = append(st.bg, bg)
		if words[0] == "tap" {
			st.tapAddr = waitTap(t, l.at, st.tapAddr, bg)
		}
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, args, strings.NewReader(stdin), &stdout, &stderr)
	want := 0
	if m := exitStatus.FindStringSubmatch(comment); m != nil {
		want = int(m[1][0] - '0')
	}
	require.Equal(t, want, code, "%s: %s\nstderr: %s", l.at, text, stderr.String())
	if m := prints.FindStringSubmatch(comment); m != nil {
		require.Equal(t, strings.Trim(m[1], `"`), strings.TrimSpace(stdout.String()), "%s: %s", l.at, text)
	}
	return true
}

// waitTap waits for the tap started by bg to write its address (the
// -addr-out file mapArgs added, named in addrFile).
func waitTap(t *testing.T, at, addrFile string, bg background) string {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(addrFile); err == nil && len(b) > 0 {
			return strings.TrimSpace(string(b))
		}
		select {
		case code := <-bg.code:
			t.Fatalf("%s: tap exited with %d: %s", at, code, bg.stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatalf("%s: tap wrote no address", at)
	return ""
}

// mapArgs maps a recipe's arguments to the test's brokers and files;
// false when the line needs something the test does not provide (a
// proxy's certificate, a file an unrun command writes).
func (e *recipeEnv) mapArgs(t *testing.T, st *blockState, words []string) ([]string, bool) {
	args := append([]string(nil), words...)
	bench := args[0] == "bench"
	// The certificate decides the target: broker.pem the standalone
	// broker, cluster.pem / ca.pem the cluster, tap.pem this block's tap.
	target, cert := e.brokerAddr, e.brokerCert
	if i := indexOf(args, "-cert"); i >= 0 && i+1 < len(args) {
		switch filepath.Base(args[i+1]) {
		case "broker.pem":
		case "cluster.pem", "ca.pem":
			target, cert = e.cl.Addr(0), e.clusterCert
		case "tap.pem":
			if st.tapAddr == "" {
				return nil, false
			}
			target, cert = st.tapAddr, st.tapCert
		default:
			return nil, false
		}
	}
	hasAddr := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "CLUSTER_ADDR" {
			args[i] = e.cl.Addr(0)
			continue
		}
		if !strings.HasPrefix(a, "-") || i+1 >= len(args) {
			if strings.HasSuffix(a, ".json") {
				if _, err := os.Stat(a); err != nil {
					return nil, false // written by a command the test does not run
				}
			}
			continue
		}
		v := &args[i+1]
		switch a {
		case "-cert":
			if args[0] == "tap" {
				*v = e.brokerCert // the tap trusts the broker
			} else {
				*v = cert
			}
			i++
		case "-addr":
			hasAddr = true
			if *v == "CLUSTER_ADDR" {
				*v = e.cl.Addr(0)
			} else if args[0] == "tap" {
				*v = e.brokerAddr
			} else {
				*v = target
			}
			i++
		case "-listen":
			*v = "127.0.0.1:0"
			st.tapAddr = filepath.Join(e.dir, "tap.addr")
			os.Remove(st.tapAddr)
			args = append(args[:i+2:i+2], append([]string{"-addr-out", st.tapAddr}, args[i+2:]...)...)
			i++
		case "-cert-out":
			*v = filepath.Join(e.dir, filepath.Base(*v))
			if args[0] == "tap" {
				st.tapCert = *v
			}
			i++
		case "-o", "-addr-out":
			*v = filepath.Join(e.dir, filepath.Base(*v))
			i++
		case "-duration":
			if bench {
				*v = "1s"
			}
			i++
		case "-n":
			if bench {
				*v = "500"
			}
			i++
		case "-warmup":
			if bench {
				*v = "0s"
			}
			i++
		}
	}
	if bench && indexOf(args, "-duration") < 0 && indexOf(args, "-n") < 0 {
		args = append(args[:2:2], append([]string{"-duration", "1s"}, args[2:]...)...)
	}
	// A cluster does not listen on the default address (127.0.0.1:7447):
	// a recipe that talks to one names its address.
	require.False(t, !hasAddr && target == e.cl.Addr(0), "%s: the line talks to a cluster without -addr (the default 127.0.0.1:7447 is not a node's): %s", t.Name(), strings.Join(words, " "))
	return args, true
}

// splitComment cuts a line at its shell comment (" #" outside quotes).
func splitComment(l string) (text, comment string) {
	var q rune
	for i, r := range l {
		switch {
		case q != 0:
			if r == q {
				q = 0
			}
		case r == '\'' || r == '"':
			q = r
		case r == '#' && (i == 0 || l[i-1] == ' '):
			return strings.TrimSpace(l[:i]), strings.TrimSpace(l[i+1:])
		}
	}
	return strings.TrimSpace(l), ""
}

// shellWords splits a command line into words, honouring quotes.
func shellWords(s string) []string {
	var out []string
	var cur strings.Builder
	var q rune
	in := false
	for _, r := range s {
		switch {
		case q != 0:
			if r == q {
				q = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			q, in = r, true
		case r == ' ' || r == '\t':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out
}

func indexOf(s []string, w string) int {
	for i, x := range s {
		if x == w {
			return i
		}
	}
	return -1
}
