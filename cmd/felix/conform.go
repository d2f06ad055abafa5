package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/flxproto/felix/vectors"
)

func init() {
	register(command{
		name:    "conform",
		usage:   "conform DIR...",
		summary: "run every vector below each DIR and report each by name",
		run:     runConform,
	})
}

func runConform(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("conform")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usagef("name at least one vector directory")
	}
	// Check every directory first: a missing or empty one is a usage
	// error (exit 2), never a vector result.
	var all []string
	for _, root := range fs.Args() {
		dirs, err := vectors.FindDirs(root)
		if err != nil {
			return usagef("%s: %v", root, oneLine(err.Error()))
		}
		if len(dirs) == 0 {
			return usagef("%s: no vector files (NAME.json + NAME.hex) below it", root)
		}
		all = append(all, dirs...)
	}
	var passed, failed, skipped int
	for _, dir := range all {
		vs, err := vectors.LoadDir(dir)
		if err != nil {
			fmt.Fprintf(stdout, "FAIL %s: %s\n", dir, oneLine(err.Error()))
			failed++
			continue
		}
		for _, v := range vs {
			if err := ctx.Err(); err != nil {
				return err
			}
			res := vectors.Run(v)
			switch res.Status {
			case vectors.Pass:
				passed++
				fmt.Fprintf(stdout, "ok   %s\n", res.ID)
			case vectors.Skip:
				skipped++
				fmt.Fprintf(stdout, "skip %s: %s\n", res.ID, oneLine(res.Reason))
			default:
				failed++
				fmt.Fprintf(stdout, "FAIL %s: %s\n", res.ID, oneLine(strings.Join(res.Problems, "; ")))
			}
		}
	}
	line := fmt.Sprintf("%d passed, %d failed", passed, failed)
	if skipped > 0 {
		line += fmt.Sprintf(", %d skipped", skipped)
	}
	fmt.Fprintln(stdout, line)
	if failed > 0 {
		fmt.Fprintf(stderr, "felix conform: %d of %d vectors failed\n", failed, passed+failed+skipped)
		return exitCode(1)
	}
	return nil
}
