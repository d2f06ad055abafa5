package conn

import (
	"fmt"
	"io"
	"os"
	"runtime"
)

// KeyLogEnv names the environment variable that, by convention (NSS,
// OpenSSL, curl, browsers), names a file to append TLS secrets to:
// SSLKEYLOGFILE. This package never reads it by itself; programs that
// honour it call KeyLogFromEnv and set Config.KeyLogWriter or
// ServerConfig.KeyLogWriter.
const KeyLogEnv = "SSLKEYLOGFILE"

// KeyLogFromEnv opens the file named by SSLKEYLOGFILE for appending
// (created with mode 0600; an existing file whose mode lets its group or
// others read or write it is refused, its mode named) and returns it with
// its path; it returns nil, ""
// when the variable is unset or empty. Every connection configured with
// the file writes its TLS 1.3 secrets there in NSS key log format
// (CLIENT_HANDSHAKE_TRAFFIC_SECRET, SERVER_HANDSHAKE_TRAFFIC_SECRET,
// CLIENT_TRAFFIC_SECRET_0, SERVER_TRAFFIC_SECRET_0 lines, each with the
// ClientHello random and the secret), which lets Wireshark and tshark
// decrypt a capture of the QUIC traffic. Anyone holding the file can read
// those connections: callers should warn when it is on (docs/debugging.md).
func KeyLogFromEnv() (io.WriteCloser, string, error) {
	path := os.Getenv(KeyLogEnv)
	if path == "" {
		return nil, "", nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, path, fmt.Errorf("%s: %w", KeyLogEnv, err)
	}
	if runtime.GOOS != "windows" {
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, path, fmt.Errorf("%s: %w", KeyLogEnv, err)
		}
		if perm := st.Mode().Perm(); perm&0o077 != 0 {
			f.Close()
			return nil, path, fmt.Errorf("%s: %s has mode %#o, readable by others than its owner: refused, TLS secrets would be appended to it (chmod 600 it, or remove it to have it created 0600)", KeyLogEnv, path, perm)
		}
	}
	return f, path, nil
}
