package crosslayer

import (
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// VectorDirs returns the vector roots of the repository at repoRoot (its
// vectors/ directory, which holds every vector set, upstream's included)
// and the extra directories of FELIX_VECTORS_DIRS (colon-separated,
// relative ones taken from repoRoot).
func VectorDirs(repoRoot string) []string {
	dirs := []string{filepath.Join(repoRoot, "vectors")}
	for _, d := range strings.Split(os.Getenv("FELIX_VECTORS_DIRS"), ":") {
		if d == "" {
			continue
		}
		if !filepath.IsAbs(d) {
			d = filepath.Join(repoRoot, d)
		}
		dirs = append(dirs, d)
	}
	return dirs
}

// VectorFrames returns the frame of every NAME.hex file below dirs, in
// walk order. A directory that does not exist, a .hex file that is not
// hex, or finding no frame at all is an error.
func VectorFrames(dirs ...string) ([][]byte, error) {
	var out [][]byte
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".hex") {
				return err
			}
			raw, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			b, err := hex.DecodeString(strings.TrimSpace(string(raw)))
			if err != nil {
				return fmt.Errorf("%s: %v", path, err)
			}
			out = append(out, b)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no vector frames below %s", strings.Join(dirs, ", "))
	}
	return out, nil
}
