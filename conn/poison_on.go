//go:build felixpoison

package conn

// poisonDefault is poisonBuffers' initial value: on in a binary built with
// the felixpoison tag (go test -tags felixpoison), so that every
// subscription poisons the buffers it releases.
const poisonDefault = true
