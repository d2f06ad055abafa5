package main

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// expectation is a vector, or a felix tap line: the members of
// vectors/FORMAT.md §2–§3 that describe one frame.
type expectation map[string]json.RawMessage

func (e expectation) has(name string) bool { _, ok := e[name]; return ok }

func (e expectation) isNull(name string) bool {
	raw, ok := e[name]
	return ok && strings.TrimSpace(string(raw)) == "null"
}

func (e expectation) str(name string) (string, error) {
	var s string
	err := json.Unmarshal(e[name], &s)
	return s, err
}

func (e expectation) number(name string) (string, error) {
	var n json.Number
	err := json.Unmarshal(e[name], &n)
	return n.String(), err
}

// bytesOf reads NAME_utf8 or NAME_hex as bytes; ok is false when neither is there.
func (e expectation) bytesOf(name string) (b []byte, ok bool, err error) {
	if raw, has := e[name+"_utf8"]; has {
		var s string
		err = json.Unmarshal(raw, &s)
		return []byte(s), true, err
	}
	if raw, has := e[name+"_hex"]; has {
		var s string
		if err = json.Unmarshal(raw, &s); err != nil {
			return nil, true, err
		}
		b, err = hex.DecodeString(s)
		return b, true, err
	}
	return nil, false, nil
}

// listOf reads NAME_utf8 or NAME_hex (arrays) as byte strings.
func (e expectation) listOf(name string) (list [][]byte, ok bool, err error) {
	if raw, has := e[name+"_utf8"]; has {
		var ss []string
		err = json.Unmarshal(raw, &ss)
		for _, s := range ss {
			list = append(list, []byte(s))
		}
		return list, true, err
	}
	if raw, has := e[name+"_hex"]; has {
		var ss []string
		if err = json.Unmarshal(raw, &ss); err != nil {
			return nil, true, err
		}
		for _, s := range ss {
			b, err := hex.DecodeString(s)
			if err != nil {
				return nil, true, err
			}
			list = append(list, b)
		}
		return list, true, nil
	}
	return nil, false, nil
}

// checker collects the differences between one expectation and one
// dissected frame.
type checker struct {
	e    expectation
	f    *felixFrame
	errs []string
}

func (c *checker) errorf(format string, args ...any) {
	c.errs = append(c.errs, fmt.Sprintf(format, args...))
}

// valueBytes is the bytes a field covers (PDML "value", hex).
func valueBytes(f field) []byte {
	b, _ := hex.DecodeString(f.Value)
	return b
}

// one returns the single field name, reporting a missing or repeated one.
func (c *checker) one(name string) (field, bool) {
	fs := c.f.all(name)
	if len(fs) != 1 {
		c.errorf("%s: %d fields, want 1", name, len(fs))
		return field{}, false
	}
	return fs[0], true
}

// absent reports a field the frame should not have.
func (c *checker) absent(name string) {
	if fs := c.f.all(name); len(fs) != 0 {
		c.errorf("%s present (%q), the frame has no such section", name, fs[0].Show)
	}
}

// num compares the decimal member name with field fname.
func (c *checker) num(member, fname string) {
	want, err := c.e.number(member)
	if err != nil {
		c.errorf("%s: %v", member, err)
		return
	}
	if f, ok := c.one(fname); ok && f.Show != want {
		c.errorf("%s = %s, want %s (%s)", fname, f.Show, want, member)
	}
}

// optNum compares an optional number: present in the expectation (and not
// null) means the field must carry it, otherwise the field must be absent
// or, when zeroOK, show 0.
func (c *checker) optNum(member, fname string, zeroOK bool) {
	if c.e.has(member) && !c.e.isNull(member) {
		c.num(member, fname)
		return
	}
	for _, f := range c.f.all(fname) {
		if !(zeroOK && f.Show == "0") {
			c.errorf("%s = %s, but %s is absent or null", fname, f.Show, member)
		}
	}
}

// text compares a string member with the bytes of field fname.
func (c *checker) text(member, fname string) {
	want, err := c.e.str(member)
	if err != nil {
		c.errorf("%s: %v", member, err)
		return
	}
	if f, ok := c.one(fname); ok && string(valueBytes(f)) != want {
		c.errorf("%s = %q, want %q (%s)", fname, valueBytes(f), want, member)
	}
}

func (c *checker) bytesField(member, fname string) {
	want, ok, err := c.e.bytesOf(member)
	if err != nil {
		c.errorf("%s: %v", member, err)
		return
	}
	if !ok {
		c.absent(fname)
		return
	}
	if f, ok := c.one(fname); ok && hex.EncodeToString(valueBytes(f)) != hex.EncodeToString(want) {
		c.errorf("%s = %x, want %x (%s)", fname, valueBytes(f), want, member)
	}
}

func (c *checker) payloads() {
	want, ok, err := c.e.listOf("payloads")
	if err != nil || !ok {
		c.errorf("payloads: missing or unreadable (%v)", err)
		return
	}
	got := c.f.all("felix.record_data")
	if len(got) != len(want) {
		c.errorf("%d records, want %d", len(got), len(want))
		return
	}
	if cnt, ok := c.one("felix.count"); ok && cnt.Show != strconv.Itoa(len(want)) {
		c.errorf("felix.count = %s, want %d", cnt.Show, len(want))
	}
	for i := range want {
		if g := valueBytes(got[i]); string(g) != string(want[i]) {
			c.errorf("record %d = %x, want %x", i, g, want[i])
		}
	}
}

// jsonWord compares a string member with a field that covers a JSON
// string token (felix.type): the token's bytes, unquoted, must equal it.
func (c *checker) jsonWord(member, fname string) {
	want, err := c.e.str(member)
	if err != nil {
		c.errorf("%s: %v", member, err)
		return
	}
	f, ok := c.one(fname)
	if !ok {
		return
	}
	var got string
	if err := json.Unmarshal(valueBytes(f), &got); err != nil {
		got = unescapeShow(f.Show)
	}
	if got != want {
		c.errorf("%s = %q, want %q (%s)", fname, got, want, member)
	}
}

// unescapeShow undoes the \xHH escapes of non-printable bytes in a PDML
// show attribute.
func unescapeShow(s string) string {
	if !strings.Contains(s, `\x`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && s[i+1] == 'x' {
			if v, err := strconv.ParseUint(s[i+2:i+4], 16, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func (c *checker) word(member, fname string) {
	want, err := c.e.str(member)
	if err != nil {
		c.errorf("%s: %v", member, err)
		return
	}
	if f, ok := c.one(fname); ok && unescapeShow(f.Show) != want {
		c.errorf("%s = %s, want %s (%s)", fname, f.Show, want, member)
	}
}

// check compares a dissected frame with its expectation. frameHex is the
// frame's bytes (for the payload of JSON frames); redacted skips the
// byte-level comparisons of a frame felix tap rewrote.
func check(e expectation, f *felixFrame, redacted bool) []string {
	c := &checker{e: e, f: f}
	kind := "json_message"
	if e.has("kind") {
		kind, _ = e.str("kind")
	}
	if kind == "invalid" {
		want, _ := e.str("error")
		got := f.all("felix.error")
		if len(got) == 0 {
			c.errorf("no felix.error, want %s", want)
		} else if got[0].Show != want {
			c.errorf("felix.error = %s, want %s", got[0].Show, want)
		}
		return c.errs
	}
	if got := f.all("felix.error"); len(got) != 0 {
		c.errorf("felix.error = %s on a valid frame", got[0].Show)
		return c.errs
	}
	if l, ok := c.one("felix.layout"); ok && l.Show != kind {
		c.errorf("felix.layout = %s, want %s", l.Show, kind)
	}
	wantFlags := "0"
	if e.has("flags") {
		wantFlags, _ = e.number("flags")
	}
	if fl, ok := c.one("felix.flags"); ok {
		n, err := strconv.ParseUint(strings.TrimPrefix(fl.Show, "0x"), 16, 16)
		if err != nil || strconv.FormatUint(n, 10) != wantFlags {
			c.errorf("felix.flags = %s, want %s", fl.Show, wantFlags)
		}
	}
	switch kind {
	case "json_message":
		if e.has("message_type") {
			c.jsonWord("message_type", "felix.type")
		}
		if !redacted {
			want, err := e.str("payload_json")
			if err != nil {
				c.errorf("payload_json: %v", err)
			} else if j, ok := c.one("felix.json"); ok && string(valueBytes(j)) != want {
				c.errorf("felix.json = %q, want %q", valueBytes(j), want)
			}
		}
	case "binary_publish_batch", "binary_acked_publish_batch":
		c.text("tenant_id", "felix.tenant_id")
		c.text("namespace", "felix.namespace")
		c.text("stream", "felix.stream")
		c.payloads()
		c.bytesField("key", "felix.key")
		if kind == "binary_acked_publish_batch" {
			c.num("request_id", "felix.request_id")
			mode, _ := e.str("ack_mode")
			want := map[string]string{"per_message": "1", "per_batch": "2"}[mode]
			if f, ok := c.one("felix.ack_mode"); ok && f.Show != want {
				c.errorf("felix.ack_mode = %s, want %s (%s)", f.Show, want, mode)
			}
			c.optNum("producer_id", "felix.producer_id", false)
			c.optNum("sequence", "felix.sequence", false)
		} else {
			c.absent("felix.request_id")
		}
	case "binary_publish_ack":
		status, _ := e.str("status")
		want := map[string]string{"ok": "0", "error": "1"}[status]
		if f, ok := c.one("felix.status"); ok && f.Show != want {
			c.errorf("felix.status = %s, want %s (%s)", f.Show, want, status)
		}
		c.num("request_id", "felix.request_id")
		if e.isNull("message") || !e.has("message") {
			if f, ok := c.one("felix.message"); ok && len(valueBytes(f)) != 0 && status == "error" {
				c.errorf("felix.message = %q, want none", valueBytes(f))
			}
		} else {
			c.text("message", "felix.message")
		}
		if e.has("code") {
			c.word("code", "felix.code_name")
			c.word("retry", "felix.retry_name")
		} else {
			c.absent("felix.code")
		}
		if e.has("reason") || e.has("retry_after_ms") {
			if e.isNull("reason") {
				if f, ok := c.one("felix.reason"); ok && len(valueBytes(f)) != 0 {
					c.errorf("felix.reason = %q, want empty", valueBytes(f))
				}
			} else {
				c.text("reason", "felix.reason")
			}
			c.optNum("retry_after_ms", "felix.retry_after_ms", true)
		} else {
			c.absent("felix.reason")
		}
		if raw, ok := e["owner"]; ok {
			var o expectation
			if err := json.Unmarshal(raw, &o); err != nil {
				c.errorf("owner: %v", err)
				break
			}
			sub := &checker{e: o, f: f}
			sub.text("node_id", "felix.owner.node_id")
			if o.isNull("addr") {
				if g, ok := sub.one("felix.owner.addr"); ok && len(valueBytes(g)) != 0 {
					sub.errorf("felix.owner.addr = %q, want empty (not published)", valueBytes(g))
				}
			} else {
				sub.text("addr", "felix.owner.addr")
			}
			sub.num("generation", "felix.owner.generation")
			c.errs = append(c.errs, sub.errs...)
		} else {
			c.absent("felix.owner.node_id")
		}
		c.optNum("offset", "felix.offset", false)
	case "binary_event_batch":
		c.payloads()
		c.optNum("subscription_id", "felix.subscription_id", false)
		c.optNum("base_offset", "felix.base_offset", false)
		c.optNum("skipped_before", "felix.skipped_before", true)
		c.bytesField("publisher", "felix.publisher")
		if raw, ok := e["timestamps_micros"]; ok {
			var ts []json.Number
			if err := json.Unmarshal(raw, &ts); err != nil {
				c.errorf("timestamps_micros: %v", err)
				break
			}
			got := f.all("felix.timestamp_micros")
			if len(got) != len(ts) {
				c.errorf("%d timestamps, want %d", len(got), len(ts))
				break
			}
			for i := range ts {
				if got[i].Show != ts[i].String() {
					c.errorf("timestamp %d = %s, want %s", i, got[i].Show, ts[i])
				}
			}
		} else {
			c.absent("felix.timestamp_micros")
		}
	default:
		c.errorf("kind %s unknown to wscheck", kind)
	}
	return c.errs
}
