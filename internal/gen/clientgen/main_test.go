package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestGeneratedFileUpToDate regenerates client/calls_gen.go in memory and
// compares it with the committed file (go generate ./... must be a no-op).
func TestGeneratedFileUpToDate(t *testing.T) {
	want, err := generate("../../../api", "../../../client")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../../client/" + outName)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("client/calls_gen.go is stale: run go generate ./...")
	}
}

// The generated method hands every parameter on, variadic ones spread,
// and spells the codec's types by client's alias where one exists.
func TestGenerateShapes(t *testing.T) {
	api, cl := t.TempDir(), t.TempDir()
	write := func(dir, name, src string) {
		t.Helper()
		if err := os.WriteFile(dir+"/"+name, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(api, "a.go", `package api

import (
	"context"

	"github.com/flxproto/felix"
)

type Calls struct{}

// Opts are options.
type Opts struct{}

// Get gets.
func (x Calls) Get(ctx context.Context, t felix.Topic, r felix.Other, o ...Opts) (n int, err error) { return 0, nil }

// Put puts to a felix.Topic (felix.Other stays; client.Client is Client).
func (x Calls) Put(ctx context.Context, a, b []byte) error { return nil }

func (x Calls) unexported() {}

// Mk makes.
func Mk(v uint64) felix.Topic { return felix.Topic{} }

// Yes is yes.
const Yes = 1

// No is no.
var No = 2
`)
	write(cl, "c.go", `package client

import "github.com/flxproto/felix"

// Topic names a stream.
type Topic = felix.Topic

type Client struct{}
`)
	out, err := generate(api, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"func (c *Client) Get(ctx context.Context, t Topic, r felix.Other, o ...Opts) (n int, err error) {\n\treturn c.calls.Get(ctx, t, r, o...)\n}",
		"// Put puts to a Topic (felix.Other stays; Client is Client).\nfunc (c *Client) Put(ctx context.Context, a, b []byte) error {\n\treturn c.calls.Put(ctx, a, b)\n}",
		"// Opts are options.\ntype Opts = api.Opts",
		"func Mk(v uint64) Topic {\n\treturn api.Mk(v)\n}",
		"// Yes is yes.\nconst Yes = api.Yes",
		"// No is no.\nvar No = api.No",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("generated code lacks\n%s\n\ngot:\n%s", want, out)
		}
	}
	for _, unwanted := range []string{"unexported", "type Calls", "c.calls.Calls"} {
		if strings.Contains(string(out), unwanted) {
			t.Errorf("generated code has %q:\n%s", unwanted, out)
		}
	}

	// A name client declares by hand is refused, not shadowed.
	write(cl, "d.go", "package client\n\n// Opts clash.\ntype Opts struct{}\n")
	if _, err := generate(api, cl); err == nil || !strings.Contains(err.Error(), "already declares Opts") {
		t.Fatalf("clash not refused: %v", err)
	}
}
