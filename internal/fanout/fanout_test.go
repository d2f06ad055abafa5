package fanout

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Join calls every non-nil function in order, skips nil ones, returns nil
// for none and the function itself for one.
func TestJoin(t *testing.T) {
	var got []string
	a := func(s string) { got = append(got, "a:"+s) }
	b := func(s string) { got = append(got, "b:"+s) }
	Join(nil, a, nil, b, a)("x")
	require.Equal(t, []string{"a:x", "b:x", "a:x"}, got)

	require.Nil(t, Join[string]())
	require.Nil(t, Join[string](nil, nil))
	got = nil
	one := Join(nil, b)
	one("y")
	require.Equal(t, []string{"b:y"}, got, "the single function is called once")
}
