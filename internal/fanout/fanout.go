// Package fanout joins observer functions: the one combinator behind
// conn.JoinHooks (per hook field) and client.JoinNotices.
package fanout

// Join returns one function that calls each non-nil element of fns in
// order. It returns nil when every element is nil and the element itself
// when only one is non-nil, so a joined observer costs nothing more than
// the observers it holds.
func Join[T any](fns ...func(T)) func(T) {
	var set []func(T)
	for _, fn := range fns {
		if fn != nil {
			set = append(set, fn)
		}
	}
	switch len(set) {
	case 0:
		return nil
	case 1:
		return set[0]
	}
	return func(ev T) {
		for _, fn := range set {
			fn(ev)
		}
	}
}
