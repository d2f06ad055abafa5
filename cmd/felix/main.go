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
// Run "felix help" for every command's flags; the broker commands take
// -addr, -cert FILE or -insecure, -tenant, -token and -json.
//
// Errors are reported as one line on stderr with a non-zero exit status.
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
// wrong. ctx is cancelled on SIGINT/SIGTERM.
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
	"syscall"
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

// parseFlags parses args with fs and maps a flag error to a usageError.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err.Error()}
	}
	return nil
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// printUsage writes the command list to w.
func printUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: felix COMMAND [ARGS]")
	fmt.Fprintln(w, "commands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		c := commands[n]
		fmt.Fprintf(w, "  felix %-34s %s\n", c.usage, c.summary)
	}
}

// run executes one felix invocation and returns its exit status. It never
// lets a panic escape: an internal error is one line on stderr.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) (code int) {
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
	case "-h", "-help", "--help", "help":
		printUsage(stdout)
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
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprintf(stdout, "usage: felix %s\n", c.usage)
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
