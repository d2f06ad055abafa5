package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
)

// session is one felix tap run: clients talk to the tap on tapPort, the
// tap to the broker on brokerPort, and log is what the tap logged.
type session struct {
	tapPort, brokerPort int
	log                 string
	alpn                bool
}

type sessionList []session

func (s *sessionList) String() string { return fmt.Sprint(*s) }

// Set parses TAPPORT,BROKERPORT,LOG[,alpn].
func (s *sessionList) Set(v string) error {
	parts := strings.Split(v, ",")
	if len(parts) < 3 || len(parts) > 4 {
		return fmt.Errorf("-session %q: want TAPPORT,BROKERPORT,LOG[,alpn]", v)
	}
	var se session
	var err error
	if se.tapPort, err = strconv.Atoi(parts[0]); err != nil {
		return err
	}
	if se.brokerPort, err = strconv.Atoi(parts[1]); err != nil {
		return err
	}
	se.log = parts[2]
	if len(parts) == 4 {
		if parts[3] != "alpn" {
			return fmt.Errorf("-session %q: the fourth part can only be alpn", v)
		}
		se.alpn = true
	}
	*s = append(*s, se)
	return nil
}

// tapLine is one line of a felix tap log (docs/debugging.md §1).
type tapLine struct {
	exp      expectation
	conn     int
	stream   string
	dir      string
	redacted bool
	name     string
}

func readTap(path string) ([]tapLine, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []tapLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var e expectation
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("%s: %v", path, err)
		}
		l := tapLine{exp: e, redacted: e.has("redacted")}
		if err := json.Unmarshal(e["conn"], &l.conn); err != nil {
			return nil, fmt.Errorf("%s: conn: %v", path, err)
		}
		sid, err := e.number("stream_id")
		if err != nil {
			return nil, fmt.Errorf("%s: stream_id: %v", path, err)
		}
		l.stream = sid
		l.dir, _ = e.str("dir")
		l.name, _ = e.str("name")
		out = append(out, l)
	}
	return out, sc.Err()
}

// capFrame is one dissected frame with the packet it was shown in.
type capFrame struct {
	f   *felixFrame
	pkt int
}

// streamKey names one direction of one QUIC stream.
type streamKey struct{ stream, dir string }

func runLive(args []string) error {
	fs := flag.NewFlagSet("live", flag.ContinueOnError)
	lua := fs.String("lua", "tools/wireshark/felix.lua", "the dissector")
	pcap := fs.String("pcap", "", "the capture")
	keylog := fs.String("keylog", "", "the TLS key log (SSLKEYLOGFILE) of the run")
	var sessions sessionList
	fs.Var(&sessions, "session", "TAPPORT,BROKERPORT,TAPLOG[,alpn]; repeatable")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *pcap == "" || *keylog == "" || len(sessions) == 0 {
		return errors.New("live: -pcap, -keylog and at least one -session are required")
	}
	extra := []string{"-o", "tls.keylog_file:" + *keylog}
	for _, s := range sessions {
		extra = append(extra, "-d", fmt.Sprintf("udp.port==%d,quic", s.tapPort), "-d", fmt.Sprintf("udp.port==%d,quic", s.brokerPort))
	}
	packets, err := tshark(*lua, *pcap, extra...)
	if err != nil {
		return err
	}
	alpns, err := alpnByConn(*pcap, extra)
	if err != nil {
		return err
	}
	var problems []string
	for _, s := range sessions {
		problems = append(problems, checkSession(s, packets, alpns)...)
	}
	// the run must have exercised reassembly and packets with several frames
	split, most := 0, 0
	for _, p := range packets {
		whole := 0
		for _, f := range p.frames {
			if _, partial := f.get("felix.partial"); partial {
				split++
			} else {
				whole++
			}
		}
		most = max(most, whole)
	}
	fmt.Printf("wscheck live: %d frames began in an earlier packet than the one completing them; at most %d frames in one packet\n", split, most)
	if split == 0 {
		problems = append(problems, "no frame spanned several QUIC packets: reassembly was not exercised")
	}
	if most < 2 {
		problems = append(problems, "no packet carried several frames")
	}
	for _, p := range problems {
		fmt.Println("FAIL", p)
	}
	if len(problems) > 0 {
		return fmt.Errorf("live: %d problems", len(problems))
	}
	return nil
}

func checkSession(s session, packets []packet, alpns map[string][]string) []string {
	lines, err := readTap(s.log)
	if err != nil {
		return []string{err.Error()}
	}
	if len(lines) == 0 {
		return []string{s.log + ": the tap logged nothing"}
	}
	tapConns := map[int]map[streamKey][]tapLine{}
	for _, l := range lines {
		m := tapConns[l.conn]
		if m == nil {
			m = map[streamKey][]tapLine{}
			tapConns[l.conn] = m
		}
		k := streamKey{l.stream, l.dir}
		m[k] = append(m[k], l)
	}
	var problems []string
	for _, leg := range []string{"client", "broker"} {
		// the dissected frames of this leg, by QUIC connection
		capConns := map[string]map[streamKey][]capFrame{}
		total := 0
		for _, p := range packets {
			onBroker := p.srcPort == s.brokerPort || p.dstPort == s.brokerPort
			onTap := p.srcPort == s.tapPort || p.dstPort == s.tapPort
			if !onTap && !onBroker || (leg == "broker") != onBroker {
				continue
			}
			for _, f := range p.frames {
				if _, partial := f.get("felix.partial"); partial {
					continue // the start of a frame shown whole in a later packet
				}
				c, _ := f.get("felix.quic_connection")
				sid, _ := f.get("felix.stream_id")
				dir, _ := f.get("felix.direction")
				m := capConns[c.Show]
				if m == nil {
					m = map[streamKey][]capFrame{}
					capConns[c.Show] = m
				}
				k := streamKey{sid.Show, dir.Show}
				m[k] = append(m[k], capFrame{f, p.num})
				total++
			}
		}
		where := fmt.Sprintf("%s (%s leg, tap port %d)", s.log, leg, s.tapPort)
		if total != len(lines) {
			problems = append(problems, fmt.Sprintf("%s: %d frames dissected, the tap logged %d", where, total, len(lines)))
		}
		// pair each tap connection with the dissected connection that
		// carries the same streams with the same number of frames
		used := map[string]bool{}
		tapIDs := make([]int, 0, len(tapConns))
		for id := range tapConns {
			tapIDs = append(tapIDs, id)
		}
		sort.Ints(tapIDs)
		capIDs := make([]string, 0, len(capConns))
		for id := range capConns {
			capIDs = append(capIDs, id)
		}
		sort.Strings(capIDs)
		for _, tid := range tapIDs {
			want := tapConns[tid]
			var match string
			var matchErrs []string
			for _, cid := range capIDs {
				if used[cid] || !sameShape(want, capConns[cid]) {
					continue
				}
				errs := compareConn(want, capConns[cid])
				if len(errs) == 0 {
					match, matchErrs = cid, nil
					break
				}
				if matchErrs == nil {
					match, matchErrs = cid, errs
				}
			}
			if match == "" {
				problems = append(problems, fmt.Sprintf("%s: tap connection %d (%d streams): no dissected QUIC connection carries the same frames", where, tid, len(want)))
				continue
			}
			used[match] = true
			for _, e := range matchErrs {
				problems = append(problems, fmt.Sprintf("%s: tap connection %d = QUIC connection %s: %s", where, tid, match, e))
			}
			got := alpns[match]
			if s.alpn && (len(got) == 0 || !allEqual(got, "felix/1")) {
				problems = append(problems, fmt.Sprintf("%s: QUIC connection %s: ALPN %v, want felix/1", where, match, got))
			}
			if !s.alpn && len(got) != 0 {
				problems = append(problems, fmt.Sprintf("%s: QUIC connection %s: ALPN %v, want none", where, match, got))
			}
		}
		fmt.Printf("wscheck live: %s: %d frames on %d connections dissected, tap logged %d on %d\n",
			where, total, len(capConns), len(lines), len(tapConns))
	}
	return problems
}

func allEqual(list []string, v string) bool {
	for _, x := range list {
		if x != v {
			return false
		}
	}
	return true
}

func sameShape(want map[streamKey][]tapLine, got map[streamKey][]capFrame) bool {
	if len(want) != len(got) {
		return false
	}
	for k, ls := range want {
		if len(got[k]) != len(ls) {
			return false
		}
	}
	return true
}

func compareConn(want map[streamKey][]tapLine, got map[streamKey][]capFrame) []string {
	var errs []string
	for k, ls := range want {
		for i, l := range ls {
			cf := got[k][i]
			for _, e := range check(l.exp, cf.f, l.redacted) {
				errs = append(errs, fmt.Sprintf("%s (packet %d): %s", l.name, cf.pkt, e))
			}
		}
	}
	sort.Strings(errs)
	return errs
}

// alpnByConn returns the ALPN ids seen in each QUIC connection's TLS
// handshake (the client's offer and the server's choice).
func alpnByConn(pcap string, extra []string) (map[string][]string, error) {
	args := append([]string{"-n", "-r", pcap, "-Y", "tls.handshake.extensions_alpn_str", "-T", "fields",
		"-E", "separator=/t", "-e", "quic.connection.number", "-e", "tls.handshake.extensions_alpn_str"}, extra...)
	cmd := exec.Command("tshark", args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("tshark %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	out := map[string][]string{}
	for _, line := range strings.Split(stdout.String(), "\n") {
		cols := strings.Split(line, "\t")
		if len(cols) != 2 {
			continue
		}
		conn := strings.Split(cols[0], ",")[0]
		out[conn] = append(out[conn], strings.Split(cols[1], ",")...)
	}
	return out, nil
}
