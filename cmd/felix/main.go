// Command felix is the Felix wire protocol tool: it turns frames into their
// conformance-vector description and back, runs vector directories, and talks
// to a broker over QUIC.
//
//	felix decode [-raw] [-max N] [HEX]   describe a frame as a vector JSON object
//	felix encode [FILE]                  print the frame hex of a vector JSON object
//	felix conform DIR...                 run every vector below each DIR
//	felix pub ...                        publish to a stream of a broker
//	felix sub ...                        subscribe to a stream and print its events
//	felix cache get|put|del|watch ...    use a broker's cache
//	felix conformance scenarios|verify   list the client catalogue, grade a results document
//
// "felix help" lists the commands on one screen with the environment
// variables (FELIX_ADDR, FELIX_CERT, FELIX_TENANT, FELIX_TOKEN,
// FELIX_NAMESPACE) the broker commands read; "felix help CMD" or
// "felix CMD -h" prints one command's synopsis, flags and defaults, and
// "felix help all" every command's. Flags go before positional arguments:
// a flag-like argument after them is refused ("--" passes data that starts
// with "-").
//
// Errors are reported as one line on stderr that names what failed and the
// likely fix. Exit status: 0 success, 1 failure, 2 usage error, 3 for
// "cache get" and "cache del" of an absent key (nothing is printed on
// stdout then). An interrupt (Ctrl-C, SIGTERM) ends every command the same
// way: it finishes what it started (felix pub publishes the lines it
// read), prints "felix CMD: interrupted[: what was done]" on stderr and
// exits 0; only an outcome the interrupt left unknown (a request sent and
// not answered) is a failure, exit status 1.
//
// # Adding a command
//
// Each command lives in its own file of this package and registers itself
// from an init function:
//
//	func init() {
//		register(command{
//			name:    "pub",
//			usage:   "pub [-addr HOST:PORT] STREAM MESSAGE...",
//			summary: "publish messages to a broker",
//			run:     runPub,
//		})
//	}
//
//	func runPub(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error
//
// args excludes the command name. Parse flags with newFlagSet so that a bad
// flag is a one-line error. Return nil on success, an error to have it
// printed as "felix pub: <error>" with exit status 1, a usageError for exit
// status 2, or exitCode(n) when the command already reported what went
// wrong. parseFlags returns a help request for -h, which run answers with
// the flag set's flags. ctx is cancelled on SIGINT/SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/flxproto/felix/client"
)

// command is one felix subcommand.
type command struct {
	// name is the word after "felix".
	name string
	// usage is the synopsis without the leading "felix ".
	usage string
	// summary is a one-line description for the command list.
	summary string
	// run executes the command with its arguments (without the name).
	run func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error
	// help, when set, writes the command's help instead of the default
	// (usage, summary and the flags run parses for -h); for commands with
	// sub-operations.
	help func(ctx context.Context, w io.Writer)
}

var commands = map[string]command{}

// register adds c to the command table. It panics on a duplicate name,
// which is a programming error caught by any test run.
func register(c command) {
	if _, dup := commands[c.name]; dup {
		panic("felix: command registered twice: " + c.name)
	}
	commands[c.name] = c
}

// usageError is a command-line mistake: exit status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// usagef returns a usageError.
func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// interrupted ends a command that stopped because it was interrupted
// (SIGINT, SIGTERM: its ctx ended) after finishing what it had started:
// run prints "felix CMD: interrupted: <what was done>" on stderr and exits
// 0, as for every command that an interrupt ends without an unknown
// outcome.
type interrupted struct{ msg string }

func (e interrupted) Error() string { return "interrupted: " + e.msg }

// interruptedf returns an interrupted error saying what was done.
func interruptedf(format string, args ...any) error {
	return interrupted{fmt.Sprintf(format, args...)}
}

// exitCode is returned by a command that has already reported its outcome
// and only needs the process to exit with that status.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// newFlagSet returns a flag set that reports errors instead of printing
// usage text, so a bad flag is one line on stderr.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// helpRequest is returned by parseFlags for -h/-help: run prints the
// command's usage with every flag, its default and the environment
// variables it reads, and exits 0.
type helpRequest struct{ fs *flag.FlagSet }

func (helpRequest) Error() string { return "help requested" }

// parseFlags parses args with fs and maps a flag error to a usageError.
// Flags come before positional arguments; an argument after the first
// positional one that looks like a flag is refused (use "--" before
// arguments that start with "-"), so "felix pub orders -ack none hi" is a
// usage error instead of three published messages.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return helpRequest{fs}
		}
		return usageError{err.Error()}
	}
	rest := fs.Args()
	if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
		return nil // everything after "--" is data
	}
	for _, a := range rest {
		if len(a) > 1 && a[0] == '-' {
			name := strings.TrimLeft(a, "-")
			if i := strings.IndexByte(name, '='); i >= 0 {
				name = name[:i]
			}
			if fs.Lookup(name) != nil || name == "h" || name == "help" {
				return usagef("flag %s after the positional arguments: put flags first (or \"--\" before data that starts with \"-\")", a)
			}
			return usagef("argument %q looks like a flag: put flags first, and \"--\" before data that starts with \"-\"", a)
		}
	}
	return nil
}

// envVars are the environment variables the broker commands read; help
// lists them.
var envVars = [][2]string{
	{"FELIX_ADDR", "default of -addr: the broker's UDP address"},
	{"FELIX_CERT", "default of -cert: PEM certificate to trust (the broker writes one with -cert-out)"},
	{"FELIX_TENANT", "default of -tenant"},
	{"FELIX_TOKEN", "default of -token"},
	{"FELIX_NAMESPACE", "default of -namespace"},
	{"SSLKEYLOGFILE", "append TLS secrets (NSS key log format) to this file, to decrypt captures; off when unset (warns)"},
}

// printFlags writes fs's flags with their defaults, and the environment
// variables when fs has the broker connection flags.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	printFlagList(w, fs)
	if fs.Lookup("addr") != nil {
		printEnv(w)
	}
}

// printFlagList writes fs's flags with their defaults.
func printFlagList(w io.Writer, fs *flag.FlagSet) {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprintln(w, "flags:")
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
}

// printEnv writes the environment variables of the broker commands.
func printEnv(w io.Writer) {
	fmt.Fprintln(w, "environment:")
	for _, e := range envVars {
		fmt.Fprintf(w, "  %-16s %s\n", e[0], e[1])
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// printUsage writes the command list to w, one line per command in
// aligned columns (the name and the summary's first clause), so that it
// fits one screen; "felix help CMD" has the synopsis and the flags.
func printUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: felix COMMAND [FLAGS] [ARGS]")
	fmt.Fprintln(w, "commands:")
	names := make([]string, 0, len(commands))
	width := 0
	for n := range commands {
		names = append(names, n)
		width = max(width, len(n))
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  felix %-*s  %s\n", width, n, shortSummary(commands[n].summary))
	}
	fmt.Fprintln(w, "\"felix help COMMAND\" (or \"felix COMMAND -h\") shows a command's synopsis and flags; \"felix help all\" every command's.")
	fmt.Fprintln(w, "flags go before positional arguments.")
	fmt.Fprintln(w, "environment (defaults of the broker commands' flags):")
	for _, e := range envVars {
		fmt.Fprintf(w, "  %-16s %s\n", e[0], e[1])
	}
	fmt.Fprintln(w, "exit status: 0 success (and Ctrl-C), 1 failure, 2 usage error (cache get/del: 3 when the key is absent)")
}

// shortSummary is a summary up to its first "; " or " (": the command
// list's one line.
func shortSummary(s string) string {
	for _, sep := range []string{"; ", " ("} {
		if i := strings.Index(s, sep); i > 0 {
			s = s[:i]
		}
	}
	return s
}

// printHelp writes the full help: the command list, then every command's
// synopsis and flags ("felix help all").
func printHelp(ctx context.Context, w io.Writer) {
	printUsage(w)
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintln(w)
		commandHelp(ctx, w, commands[n])
	}
}

// commandHelp writes one command's usage and flags (asking the command
// itself, with -h, so the list is the one it parses).
func commandHelp(ctx context.Context, w io.Writer, c command) {
	if c.help != nil {
		c.help(ctx, w)
		return
	}
	err := c.run(ctx, []string{"-h"}, strings.NewReader(""), io.Discard, io.Discard)
	var hr helpRequest
	fmt.Fprintf(w, "usage: felix %s\n  %s\n", c.usage, c.summary)
	if errors.As(err, &hr) {
		printFlags(w, hr.fs)
	}
}

// run executes one felix invocation and returns its exit status. It never
// lets a panic escape: an internal error is one line on stderr. A command's
// goroutines (a relay's log, a key log, progress) may write stdout and
// stderr at once: each Write to either is whole and serialised.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) (code int) {
	stdout, stderr = serialized(stdout), serialized(stderr)
	name := "felix"
	defer func() {
		if p := recover(); p != nil {
			fmt.Fprintf(stderr, "%s: internal error: %v\n", name, p)
			code = 2
		}
	}()
	if len(args) == 0 {
		printUsage(stderr)
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help":
		printUsage(stdout)
		return 0
	case "help":
		if len(args) == 1 {
			printUsage(stdout)
			return 0
		}
		if args[1] == "all" {
			printHelp(ctx, stdout)
			return 0
		}
		c, ok := commands[args[1]]
		if !ok {
			fmt.Fprintf(stderr, "felix help: unknown command %q (try felix help)\n", args[1])
			return 2
		}
		if len(args) > 2 && c.help != nil {
			// e.g. "felix help cache watch": the operation's own flags.
			return run(ctx, append(append([]string{c.name}, args[2:]...), "-h"), stdin, stdout, stderr)
		}
		commandHelp(ctx, stdout, c)
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "felix: unknown command %q (try felix help)\n", args[0])
		return 2
	}
	name = "felix " + c.name
	err := c.run(ctx, args[1:], stdin, stdout, stderr)
	var ue usageError
	var ec exitCode
	var hr helpRequest
	var ie interrupted
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ie):
		fmt.Fprintf(stderr, "%s: %s\n", name, oneLine(ie.Error()))
		return 0
	case ctx.Err() != nil && errors.Is(err, context.Canceled) && !errors.Is(err, client.ErrAmbiguous):
		// Interrupted while waiting (connecting, for an answer of a call
		// that changes nothing): nothing is left half done.
		fmt.Fprintf(stderr, "%s: interrupted\n", name)
		return 0
	case errors.Is(err, flag.ErrHelp):
		// A command that answers -h itself, before parsing flags.
		if c.help != nil {
			c.help(ctx, stdout)
		} else {
			fmt.Fprintf(stdout, "usage: felix %s\n  %s\n", c.usage, c.summary)
		}
		return 0
	case errors.As(err, &hr):
		usage := c.usage
		if hr.fs.Name() != c.name {
			usage = hr.fs.Name() + " [FLAGS] ..." // a sub-operation, e.g. "cache watch"
			if u, ok := subUsage[hr.fs.Name()]; ok {
				usage = u
			} else if strings.HasPrefix(c.usage, hr.fs.Name()+" ") {
				usage = c.usage // the command's only operation, e.g. "state get"
			}
		}
		fmt.Fprintf(stdout, "usage: felix %s\n  %s\n", usage, c.summary)
		printFlags(stdout, hr.fs)
		return 0
	case errors.As(err, &ec):
		return int(ec)
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "%s: %s (usage: felix %s)\n", name, oneLine(ue.msg), c.usage)
		return 2
	default:
		fmt.Fprintf(stderr, "%s: %s\n", name, oneLine(err.Error()))
		return 1
	}
}

// oneLine folds a multi-line message onto one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// lockedWriter serialises the Writes of several goroutines to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// serialized returns w with its Writes serialised (w itself when it
// already is).
func serialized(w io.Writer) io.Writer {
	if _, ok := w.(*lockedWriter); ok {
		return w
	}
	return &lockedWriter{w: w}
}
