//go:build !felixpoison

package conn

// poisonDefault is poisonBuffers' initial value: off unless built with the
// felixpoison tag.
const poisonDefault = false
