package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/flxproto/felix/conformance"
)

func init() {
	register(command{
		name:    "conformance",
		usage:   "conformance scenarios [-required] [-json] | verify [-passing FILE] RESULTS.json",
		summary: "list the client scenario catalogue, or grade a results document",
		run:     runConformance,
		help:    conformanceHelp,
	})
	subUsage["conformance scenarios"] = "conformance scenarios [-required] [-json]"
	subUsage["conformance verify"] = "conformance verify [-passing FILE] RESULTS.json   (exit 0 conformant, 1 not conformant, 2 unreadable, 3 a -passing scenario did not pass)"
}

// conformanceHelp prints both verbs with their flags.
func conformanceHelp(ctx context.Context, w io.Writer) {
	fmt.Fprintln(w, "usage: felix "+subUsage["conformance scenarios"])
	fmt.Fprintln(w, "  list the client scenario catalogue (63 scenarios, 49 required)")
	if err := runConformanceScenarios([]string{"-h"}, io.Discard); err != nil {
		var hr helpRequest
		if errors.As(err, &hr) {
			printFlags(w, hr.fs)
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "usage: felix "+subUsage["conformance verify"])
	fmt.Fprintln(w, "  grade a results document by the catalogue's verdict rules; a pass counts only with the evidence its scenario names (- reads standard input)")
	if err := runConformanceVerify([]string{"-h"}, nil, io.Discard, io.Discard); err != nil {
		var hr helpRequest
		if errors.As(err, &hr) {
			printFlags(w, hr.fs)
		}
	}
}

// runConformance dispatches "felix conformance scenarios" and "felix
// conformance verify". verify exits 0 when the document is conformant, 1
// when it is not, 2 when it cannot be read, and 3 when a scenario listed in
// the -passing file did not pass (a regression, whatever the verdict).
func runConformance(_ context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("name a verb: scenarios or verify")
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		return flag.ErrHelp
	case "scenarios":
		return runConformanceScenarios(args[1:], stdout)
	case "verify":
		return runConformanceVerify(args[1:], stdin, stdout, stderr)
	default:
		return usagef("unknown verb %q: want scenarios or verify", args[0])
	}
}

func runConformanceScenarios(args []string, stdout io.Writer) error {
	fs := newFlagSet("conformance scenarios")
	required := fs.Bool("required", false, "list only the required scenarios")
	asJSON := fs.Bool("json", false, "print the scenarios as a JSON array")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("conformance scenarios takes no arguments, got %q", fs.Arg(0))
	}
	var list []conformance.Scenario
	for _, s := range conformance.Scenarios() {
		if !*required || s.Required {
			list = append(list, s)
		}
	}
	if *asJSON {
		data, err := json.MarshalIndent(list, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "%s\n", data)
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	for _, s := range list {
		kind := "optional"
		if s.Required {
			kind = "required"
		}
		title := s.Title
		if st := s.Step; st != nil {
			title += fmt.Sprintf(" (%s, %s after %d of %d, hold %d ms)", st.During, st.Fault, st.AfterRecords, st.Records, st.HoldMS)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", s.ID, kind, title)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return nil
}

func runConformanceVerify(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("conformance verify")
	passing := fs.String("passing", "", "`FILE` of scenario ids (one a line) that must pass; exit 3 when one did not")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("name one results document (- for standard input)")
	}
	var (
		res conformance.Results
		err error
	)
	if path := fs.Arg(0); path == "-" {
		res, err = conformance.ReadResults(stdin)
	} else {
		res, err = conformance.LoadResults(path)
	}
	if err != nil {
		fmt.Fprintf(stderr, "felix conformance verify: cannot read the results document: %s\n", oneLine(err.Error()))
		return exitCode(2)
	}
	var mustPass []string
	if *passing != "" {
		f, err := os.Open(*passing)
		if err == nil {
			mustPass, err = conformance.ReadIDList(f)
			f.Close()
		}
		if err != nil {
			fmt.Fprintf(stderr, "felix conformance verify: -passing: %s\n", oneLine(err.Error()))
			return exitCode(2)
		}
	}
	rep := conformance.Verify(res)
	if err := rep.Write(stdout); err != nil {
		return err
	}
	if regs := conformance.Regressions(res, mustPass); len(regs) > 0 {
		for _, l := range regs {
			fmt.Fprintln(stdout, l)
		}
		fmt.Fprintf(stderr, "felix conformance verify: %d scenarios of %s did not pass\n", len(regs), *passing)
		return exitCode(3)
	}
	if !rep.Conformant() {
		return exitCode(1)
	}
	return nil
}
