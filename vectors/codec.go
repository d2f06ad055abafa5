// Package vectors reads and runs Felix conformance vectors (NAME.json +
// NAME.hex pairs in the format of the protocol's vectors/FORMAT.md) and
// turns frames into their vector description and back. The runner test in
// this package runs every vector directory below it (the project's own
// vectors and upstream's, in upstream/) plus the extra directories listed in
// FELIX_VECTORS_DIRS.
package vectors

import (
	"encoding/json"
	"sort"
	"sync"

	"github.com/flxproto/felix"
)

// Member is one decoded member of a vector object, in the order the
// description prints it. Value is anything encoding/json marshals (string,
// uint64, bool, nil, []string, []uint64, map[string]any, json.RawMessage for
// exact JSON text, ...).
type Member struct {
	Name  string
	Value any
}

// Codec connects one vector kind (FORMAT.md: json_message,
// binary_publish_batch, binary_acked_publish_batch, binary_publish_ack,
// binary_event_batch) to the codec in the root package.
type Codec struct {
	// Kind is the vector kind, also the `layout` name used by invalid vectors.
	Kind string
	// Decode decodes a whole frame (12-byte header + payload) with this
	// kind's layout. maxPayload is the frame limit (0 = default). It returns
	// the kind-specific members (not name/kind/flags/frame_hex/payload_hex)
	// and the frame re-encoded from the decoded value.
	Decode func(frame []byte, maxPayload uint32) (members []Member, reencoded []byte, err error)
	// Encode builds a whole frame from a vector object's members (the
	// inverse of Decode's members) and its header flags.
	Encode func(v map[string]json.RawMessage, flags felix.Flags) ([]byte, error)
}

var (
	mu     sync.RWMutex
	codecs = map[string]Codec{}
)

// Register makes c available to the runner and the CLI. It is called from
// init functions of the kind_*.go files of this package.
func Register(c Codec) {
	mu.Lock()
	defer mu.Unlock()
	codecs[c.Kind] = c
}

// Lookup returns the codec registered for kind.
func Lookup(kind string) (Codec, bool) {
	mu.RLock()
	defer mu.RUnlock()
	c, ok := codecs[kind]
	return c, ok
}

// Kinds returns the registered kinds, sorted.
func Kinds() []string {
	mu.RLock()
	defer mu.RUnlock()
	ks := make([]string, 0, len(codecs))
	for k := range codecs {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
