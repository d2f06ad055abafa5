package main

import (
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/flxproto/felix/conn"
)

// keyLog is the process's SSLKEYLOGFILE writer, opened on first use and
// kept open until the process exits (every connection appends to it).
var keyLog struct {
	mu   sync.Mutex
	path string
	w    io.WriteCloser
}

// keyLogWriter returns the writer for Config.KeyLogWriter / ServerConfig.
// KeyLogWriter when SSLKEYLOGFILE is set (nil, nil when it is not: the key
// log is off by default), warning on stderr (nil: os.Stderr) each time a
// file is opened: anyone holding it can decrypt the session.
func keyLogWriter(stderr io.Writer) (io.Writer, error) {
	keyLog.mu.Lock()
	defer keyLog.mu.Unlock()
	if path := os.Getenv(conn.KeyLogEnv); path == "" {
		return nil, nil
	} else if keyLog.w != nil && path == keyLog.path {
		return keyLog.w, nil
	}
	w, path, err := conn.KeyLogFromEnv()
	if err != nil {
		return nil, err
	}
	if keyLog.w != nil {
		keyLog.w.Close()
	}
	keyLog.path, keyLog.w = path, w
	if stderr == nil {
		stderr = os.Stderr
	}
	fmt.Fprintf(stderr, "felix: WARNING: %s is set: TLS secrets are appended to %s; anyone with that file can decrypt these connections (debugging only)\n", conn.KeyLogEnv, path)
	return w, nil
}
