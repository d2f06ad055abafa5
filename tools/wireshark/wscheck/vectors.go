package main

import (
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/flxproto/felix/vectors"
)

func runVectors(args []string) error {
	fs := flag.NewFlagSet("vectors", flag.ContinueOnError)
	lua := fs.String("lua", "tools/wireshark/felix.lua", "the dissector")
	work := fs.String("work", "", "directory for the pcaps (default: a temporary one)")
	verbose := fs.Bool("v", false, "list every vector")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return errors.New("vectors: name at least one vector directory (every directory below it with a .json file is read)")
	}
	dir := *work
	if dir == "" {
		d, err := os.MkdirTemp("", "wscheck")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	// One pcap per payload limit: max_frame_bytes is a preference.
	type item struct {
		v     vectors.Vector
		frame []byte
	}
	groups := map[uint64][]item{}
	total := 0
	var dirs []string
	for _, root := range fs.Args() {
		ds, err := vectors.FindDirs(root)
		if err != nil {
			return err
		}
		dirs = append(dirs, ds...)
	}
	for _, d := range dirs {
		vs, err := vectors.LoadDir(d)
		if err != nil {
			return err
		}
		for _, v := range vs {
			if v.LoadErr != nil {
				return fmt.Errorf("%s: %v", v.ID(), v.LoadErr)
			}
			frame, err := hex.DecodeString(v.Hex)
			if err != nil {
				return fmt.Errorf("%s.hex: %v", v.ID(), err)
			}
			var max uint64 = 16 << 20
			if raw, ok := v.Members["max_frame_bytes"]; ok {
				if max, err = strconv.ParseUint(string(raw), 10, 32); err != nil {
					return fmt.Errorf("%s: max_frame_bytes: %v", v.ID(), err)
				}
			}
			groups[max] = append(groups[max], item{v, frame})
			total++
		}
	}
	limits := make([]uint64, 0, len(groups))
	for m := range groups {
		limits = append(limits, m)
	}
	sort.Slice(limits, func(i, j int) bool { return limits[i] < limits[j] })
	failed := 0
	for _, max := range limits {
		items := groups[max]
		pdus := make([][]byte, len(items))
		for i, it := range items {
			pdus[i] = it.frame
		}
		pcap := filepath.Join(dir, fmt.Sprintf("vectors-%d.pcap", max))
		if err := writeExportPDU(pcap, "felix", pdus); err != nil {
			return err
		}
		packets, err := tshark(*lua, pcap, "-o", fmt.Sprintf("felix.max_frame_bytes:%d", max))
		if err != nil {
			return err
		}
		if len(packets) != len(items) {
			return fmt.Errorf("%s: tshark shows %d packets, wrote %d", pcap, len(packets), len(items))
		}
		for i, it := range items {
			p := packets[i]
			var errs []string
			if len(p.frames) != 1 {
				errs = []string{fmt.Sprintf("%d felix frames in the packet, want 1", len(p.frames))}
			} else {
				errs = check(expectation(it.v.Members), p.frames[0], false)
			}
			if len(errs) > 0 {
				failed++
				fmt.Printf("FAIL %s (packet %d of %s)\n", it.v.ID(), p.num, filepath.Base(pcap))
				for _, e := range errs {
					fmt.Printf("     %s\n", e)
				}
			} else if *verbose {
				fmt.Printf("ok   %s\n", it.v.ID())
			}
		}
	}
	fmt.Printf("wscheck vectors: %d vectors in %d directories, %d failed\n", total, len(dirs), failed)
	if failed > 0 {
		return fmt.Errorf("%d of %d vectors dissected wrongly", failed, total)
	}
	return nil
}
