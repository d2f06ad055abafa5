package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/flxproto/felix/client"
)

// benchReport is the result of a felix bench run: the text report and,
// with -json, the same fields as one JSON object.
type benchReport struct {
	Mode        string         `json:"mode"`
	Stream      string         `json:"stream"`
	Brokers     []string       `json:"brokers"`
	Config      benchRunConfig `json:"config"`
	Machine     benchMachine   `json:"machine"`
	Interrupted bool           `json:"interrupted,omitempty"`
	// ElapsedSec is the whole run; MeasuredSec the part after the warm-up
	// during which records were sent (or, in bench sub, received).
	ElapsedSec  float64          `json:"elapsed_s"`
	MeasuredSec float64          `json:"measured_s"`
	Publishers  []benchRate      `json:"publishers,omitempty"`
	Subscribers []benchRate      `json:"subscribers,omitempty"`
	Published   *benchRate       `json:"published,omitempty"`
	Delivered   *benchRate       `json:"delivered,omitempty"`
	AckLatency  *benchLatency    `json:"publish_ack_latency,omitempty"`
	Delivery    *benchLatency    `json:"publish_delivery_latency,omitempty"`
	Errors      []benchErrClass  `json:"errors"`
	Client      benchClientStats `json:"client"`
	Verify      benchVerify      `json:"verify"`
}

// benchMachine says where the load generator ran: figures from a loaded
// machine are not figures of the broker alone.
type benchMachine struct {
	Go         string `json:"go"`
	CPUs       int    `json:"cpus"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	// LoadAvg is /proc/loadavg's 1, 5 and 15 minute averages at the end
	// of the run, when the system has it.
	LoadAvg string `json:"loadavg,omitempty"`
}

// machine describes this process's machine.
func machine() benchMachine {
	m := benchMachine{Go: runtime.Version(), CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0)}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			m.LoadAvg = strings.Join(f[:3], " ")
		}
	}
	return m
}

// benchRunConfig echoes the command line's load shape.
type benchRunConfig struct {
	Pubs      int     `json:"pubs"`
	Subs      int     `json:"subs"`
	Conns     int     `json:"conns"`
	Size      int     `json:"size"`
	Batch     int     `json:"batch"`
	Ack       string  `json:"ack"`
	Keys      int     `json:"keys"`
	Shard     string  `json:"shard"`
	Count     int64   `json:"count,omitempty"`
	Duration  float64 `json:"duration_s,omitempty"`
	WarmupSec float64 `json:"warmup_s"`
}

// benchRate is one publisher's, subscriber's or the total throughput over
// the measured part of the run.
type benchRate struct {
	Name       string  `json:"name"`
	Records    int64   `json:"records"`
	Bytes      int64   `json:"bytes"`
	Seconds    float64 `json:"seconds"`
	RecordsSec float64 `json:"records_per_s"`
	MBSec      float64 `json:"mb_per_s"`
	Errors     int64   `json:"errors,omitempty"`
	Stopped    string  `json:"stopped_by,omitempty"`
}

// benchLatency summarises a latency histogram, in microseconds.
type benchLatency struct {
	Count int64 `json:"count"`
	P50   int64 `json:"p50_us"`
	P90   int64 `json:"p90_us"`
	P99   int64 `json:"p99_us"`
	P999  int64 `json:"p99_9_us"`
	Max   int64 `json:"max_us"`
}

// benchErrClass is the count of one error class and its first message.
type benchErrClass struct {
	Class string `json:"class"`
	Count int64  `json:"count"`
	First string `json:"first"`
}

// benchClientStats counts what the cluster-aware client did on its own.
type benchClientStats struct {
	Redirects    int64 `json:"redirects"`
	Retries      int64 `json:"retries"`
	Resumes      int64 `json:"resumes"`
	Connects     int64 `json:"connects"`
	Disconnects  int64 `json:"disconnects"`
	DialFailures int64 `json:"dial_failures"`
	ShardsLost   int64 `json:"shards_lost"`
	// Lagged counts subscription_lagged endings; the client resumes each
	// one after the last delivered record (no record skipped).
	Lagged int64 `json:"lagged"`
}

// benchVerify is the loss check: every subscriber counts the sequence
// numbers of every publisher; a record that was acknowledged and that a
// subscriber did not receive is lost.
type benchVerify struct {
	// Checked is false when the run cannot tell (no subscribers or no
	// publishers in this process, or subscribers reading one shard of
	// keyed records); Why says why.
	Checked bool   `json:"checked"`
	Why     string `json:"why,omitempty"`
	// Incomplete: a bookkeeping bound was reached (more than 4096 holes
	// or unacknowledged ranges per publisher); counts are lower bounds.
	Incomplete bool   `json:"incomplete,omitempty"`
	Sent       uint64 `json:"sent"`
	Acked      uint64 `json:"acked"`
	// LostAcked sums, over subscribers, the acknowledged records a
	// subscriber did not receive; MissingUnacked the records whose publish
	// failed or was not acknowledged (ack none) that it did not receive.
	LostAcked      uint64 `json:"lost_acked"`
	MissingUnacked uint64 `json:"missing_unacked"`
	Duplicates     uint64 `json:"duplicates"`
	Foreign        int64  `json:"foreign"`
	// Untracked: records of more publishers than a subscriber keeps
	// bookkeeping for (1024), or with an implausible sequence number.
	Untracked int64    `json:"untracked,omitempty"`
	FirstLost []string `json:"first_lost,omitempty"`
	// Gaps (bench sub): sequence numbers below the highest one received
	// per publisher that did not arrive.
	Gaps uint64 `json:"gaps,omitempty"`
}

// summarize reads the percentiles of h.
func summarize(h *hdrhistogram.Histogram) *benchLatency {
	if h.TotalCount() == 0 {
		return nil
	}
	return &benchLatency{Count: h.TotalCount(), P50: h.ValueAtQuantile(50), P90: h.ValueAtQuantile(90),
		P99: h.ValueAtQuantile(99), P999: h.ValueAtQuantile(99.9), Max: h.Max()}
}

// rateOf is the throughput of records and bytes between first and last.
func rateOf(name string, records, bytes int64, first, last time.Time) benchRate {
	r := benchRate{Name: name, Records: records, Bytes: bytes}
	if !first.IsZero() && last.After(first) {
		r.Seconds = last.Sub(first).Seconds()
		r.RecordsSec = float64(records) / r.Seconds
		r.MBSec = float64(bytes) / r.Seconds / 1e6
	}
	return r
}

// rate is the worker's line of the report.
func (w *workerStats) rate(name string) benchRate {
	r := rateOf(name, w.mRecords, w.mBytes, w.first, w.last)
	r.Errors = w.errors
	if w.stopErr != nil {
		r.Stopped = oneLine(w.stopErr.Error())
	}
	return r
}

// total sums worker rates over the span of all of them.
func total(ws []*workerStats) *benchRate {
	var rec, by int64
	var first, last time.Time
	for _, w := range ws {
		rec += w.mRecords
		by += w.mBytes
		if !w.first.IsZero() && (first.IsZero() || w.first.Before(first)) {
			first = w.first
		}
		if w.last.After(last) {
			last = w.last
		}
	}
	r := rateOf("total", rec, by, first, last)
	return &r
}

// report builds the run's report.
func (b *bench) report(interrupted bool) *benchReport {
	cfg := b.cfg
	end := time.Now()
	r := &benchReport{Mode: cfg.mode, Stream: cfg.stream, Brokers: cfg.seeds, Interrupted: interrupted,
		ElapsedSec: end.Sub(b.start).Seconds(), Machine: machine(),
		Config: benchRunConfig{Pubs: cfg.pubs, Subs: cfg.subs, Conns: cfg.conns, Size: cfg.size, Batch: cfg.batch,
			Ack: cfg.ack, Keys: cfg.keys, Shard: fmt.Sprint(cfg.shard), Count: cfg.count, Duration: cfg.duration.Seconds(), WarmupSec: cfg.warmup.Seconds()},
		Errors: []benchErrClass{}}
	if cfg.allShards {
		r.Config.Shard = "all"
	}
	var pw, sw []*workerStats
	for _, p := range b.pubs {
		r.Publishers = append(r.Publishers, p.rate(fmt.Sprintf("pub %d", p.idx)))
		pw = append(pw, &p.workerStats)
	}
	for _, s := range b.subs {
		r.Subscribers = append(r.Subscribers, s.rate(fmt.Sprintf("sub %d", s.idx)))
		sw = append(sw, &s.workerStats)
	}
	if len(pw) > 0 {
		r.Published = total(pw)
		r.MeasuredSec = r.Published.Seconds
	}
	if len(sw) > 0 {
		r.Delivered = total(sw)
		if len(pw) == 0 {
			r.MeasuredSec = r.Delivered.Seconds
		}
	}
	r.AckLatency = summarize(b.ackHist)
	r.Delivery = summarize(b.deliverHis)
	b.errMu.Lock()
	for k, e := range b.errors {
		r.Errors = append(r.Errors, benchErrClass{Class: k, Count: e.n, First: e.first})
	}
	b.errMu.Unlock()
	slices.SortFunc(r.Errors, func(a, c benchErrClass) int { return strings.Compare(a.Class, c.Class) })
	n := func(k client.NoticeKind) int64 { return b.notices[k].Load() }
	r.Client = benchClientStats{Redirects: n(client.NoticeRedirect), Retries: n(client.NoticeRetry), Resumes: n(client.NoticeResumed),
		Connects: n(client.NoticeConnected), Disconnects: n(client.NoticeDisconnected), DialFailures: n(client.NoticeDialFailed),
		ShardsLost: n(client.NoticeShardLost), Lagged: n(client.NoticeLagged)}
	r.Verify = b.verify()
	if interrupted && r.Verify.Checked {
		// Records still in flight cannot be told from lost ones.
		r.Verify.Checked = false
		r.Verify.Why = "interrupted before the subscribers could catch up"
		r.Verify.LostAcked, r.Verify.MissingUnacked, r.Verify.FirstLost = 0, 0, nil
	}
	return r
}

// verify runs the loss check over every subscriber's bookkeeping.
func (b *bench) verify() benchVerify {
	cfg := b.cfg
	var v benchVerify
	for _, s := range b.subs {
		v.Foreign += s.foreign
		v.Untracked += s.untrack
	}
	v.Incomplete = v.Untracked > 0
	for _, p := range b.pubs {
		sent := p.sent.Load()
		v.Sent += sent
		if cfg.ack != benchAckNone {
			v.Acked += sent - p.unacked.count()
		}
		v.Incomplete = v.Incomplete || p.unacked.overflow
	}
	switch {
	case len(b.subs) == 0:
		v.Why = "no subscribers in this run (bench pub): run bench sub alongside, or bench pubsub"
		return v
	case len(b.pubs) == 0:
		// bench sub: gaps below the highest sequence number seen.
		v.Why = "no publishers in this run (bench sub): only gaps below the highest sequence number received per publisher are counted"
		for _, s := range b.subs {
			for _, set := range s.seqs {
				set.finish(set.top)
				v.Gaps += set.missing()
				v.Duplicates += set.dups
				v.Incomplete = v.Incomplete || set.holes.overflow
			}
		}
		return v
	case cfg.keys > 0 && !cfg.allShards:
		v.Why = fmt.Sprintf("subscribers read shard %d only while the records are spread over %d keys: use -shard all", cfg.shard, cfg.keys)
		return v
	}
	v.Checked = true
	for _, s := range b.subs {
		for _, p := range b.pubs {
			set := s.seqs[[2]uint32{b.run, uint32(p.idx)}]
			if set == nil {
				set = &seqSet{}
			}
			set.finish(p.sent.Load())
			v.Duplicates += set.dups
			v.Incomplete = v.Incomplete || set.holes.overflow
			excused := p.unacked.r
			if cfg.ack == benchAckNone {
				excused = []seqRange{{0, p.sent.Load()}}
			}
			lost, first := set.missingExcept(excused, 5)
			v.LostAcked += lost
			v.MissingUnacked += set.missing() - lost
			for _, f := range first {
				if len(v.FirstLost) < 10 {
					v.FirstLost = append(v.FirstLost, fmt.Sprintf("sub %d: pub %d seq %d..%d", s.idx, p.idx, f.lo, f.hi-1))
				}
			}
		}
	}
	return v
}

// failure is the run's verdict as an error (nil: success): a lost
// acknowledged record, or a publisher or subscriber stopped by an error.
func (r *benchReport) failure() error {
	if r.Interrupted {
		return interruptedf("the report covers the run until then")
	}
	if r.Verify.LostAcked > 0 {
		return fmt.Errorf("%d acknowledged record(s) did not reach every subscriber (first: %s)", r.Verify.LostAcked, strings.Join(r.Verify.FirstLost, "; "))
	}
	for _, w := range append(append([]benchRate{}, r.Publishers...), r.Subscribers...) {
		if w.Stopped != "" {
			return fmt.Errorf("%s stopped: %s", w.Name, w.Stopped)
		}
	}
	return nil
}

// write prints the report: text, or one JSON object.
func (r *benchReport) write(w io.Writer, asJSON bool) error {
	if asJSON {
		b, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	c := r.Config
	keys := "unkeyed"
	if c.Keys > 0 {
		keys = fmt.Sprintf("%d keys", c.Keys)
	}
	fmt.Fprintf(w, "felix bench %s: stream %s on %s\n", r.Mode, r.Stream, strings.Join(r.Brokers, ","))
	fmt.Fprintf(w, "%d publisher(s), %d subscriber(s), %d connection(s), %d B records, %d per batch, ack %s, %s, shard %s, warm-up %gs\n",
		c.Pubs, c.Subs, c.Conns, c.Size, c.Batch, c.Ack, keys, c.Shard, c.WarmupSec)
	if r.Interrupted {
		fmt.Fprintln(w, "INTERRUPTED: figures cover the run until the interrupt")
	}
	fmt.Fprintf(w, "elapsed %.2fs, measured %.2fs; %s, %d CPUs", r.ElapsedSec, r.MeasuredSec, r.Machine.Go, r.Machine.CPUs)
	if r.Machine.LoadAvg != "" {
		fmt.Fprintf(w, ", load average %s", r.Machine.LoadAvg)
	}
	fmt.Fprint(w, "\n\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	rates := func(title string, ws []benchRate, tot *benchRate) {
		if tot == nil {
			return
		}
		fmt.Fprintf(tw, "%s\trecords\trec/s\tMB/s\terrors\t\n", title)
		if len(ws) > 1 {
			for _, x := range ws {
				fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.2f\t%d\t\n", x.Name, x.Records, x.RecordsSec, x.MBSec, x.Errors)
			}
		}
		var errs int64
		for _, x := range ws {
			errs += x.Errors
		}
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.2f\t%d\t\n", tot.Name, tot.Records, tot.RecordsSec, tot.MBSec, errs)
	}
	rates("published", r.Publishers, r.Published)
	rates("delivered", r.Subscribers, r.Delivered)
	tw.Flush()
	for _, x := range append(append([]benchRate{}, r.Publishers...), r.Subscribers...) {
		if x.Stopped != "" {
			fmt.Fprintf(w, "%s stopped: %s\n", x.Name, x.Stopped)
		}
	}
	if r.AckLatency != nil || r.Delivery != nil {
		fmt.Fprintln(w)
		fmt.Fprintf(tw, "latency (µs)\tcount\tp50\tp90\tp99\tp99.9\tmax\t\n")
		for _, l := range []struct {
			name string
			l    *benchLatency
		}{{"publish->ack (per batch)", r.AckLatency}, {"publish->delivery", r.Delivery}} {
			if l.l != nil {
				fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t\n", l.name, l.l.Count, l.l.P50, l.l.P90, l.l.P99, l.l.P999, l.l.Max)
			}
		}
		tw.Flush()
	}
	fmt.Fprintln(w)
	if len(r.Errors) == 0 {
		fmt.Fprintln(w, "errors: none")
	}
	for _, e := range r.Errors {
		fmt.Fprintf(w, "errors %s: %d (first: %s)\n", e.Class, e.Count, e.First)
	}
	cs := r.Client
	fmt.Fprintf(w, "client: %d redirects, %d retries, %d resumes, %d connects, %d disconnects, %d dial failures, %d shards lost, %d lagged (resumed by the client)\n",
		cs.Redirects, cs.Retries, cs.Resumes, cs.Connects, cs.Disconnects, cs.DialFailures, cs.ShardsLost, cs.Lagged)
	v := r.Verify
	switch {
	case v.Checked:
		fmt.Fprintf(w, "verify: %d sent, %d acked; lost acked %d, missing unacked %d, duplicates %d", v.Sent, v.Acked, v.LostAcked, v.MissingUnacked, v.Duplicates)
	case r.Mode == "sub":
		fmt.Fprintf(w, "verify: gaps %d, duplicates %d (%s)", v.Gaps, v.Duplicates, v.Why)
	default:
		fmt.Fprintf(w, "verify: not checked (%s)", v.Why)
	}
	if v.Foreign > 0 {
		fmt.Fprintf(w, ", %d records without a bench header", v.Foreign)
	}
	if v.Untracked > 0 {
		fmt.Fprintf(w, ", %d records not tracked", v.Untracked)
	}
	if v.Incomplete {
		fmt.Fprint(w, " [INCOMPLETE: bookkeeping bound reached, counts are lower bounds]")
	}
	fmt.Fprintln(w)
	for _, f := range v.FirstLost {
		fmt.Fprintf(w, "  lost: %s\n", f)
	}
	return nil
}
