package client

import "strings"

// DialsError ends a call after dials of more than one broker failed:
// every broker it could use failed to connect once (a call other than
// Subscribe and CacheWatch does not dial them again), or its context
// expired while it dialled. It names every broker tried with the last
// failure of its dial (each a *conn.DialError naming the address and the
// cause: no answer within the real wait, a certificate refused, ...).
// errors.Is matches the context's error when it ended the call
// (context.DeadlineExceeded) and everything each dial's error matches;
// errors.As finds the dials' *conn.DialError. A call that tried one
// broker returns that broker's *conn.DialError itself.
type DialsError struct {
	// Op is the call ("connect", "publish", "subscribe", ...).
	Op string
	// Ctx is the context's error when the context ended the call (nil
	// when every broker failed).
	Ctx error
	// Dials is the last failed dial of each broker tried, in the order
	// the call first tried them.
	Dials []error
}

// Error names the call, the context's end and each dial's failure.
func (e *DialsError) Error() string {
	var b strings.Builder
	b.WriteString("client: ")
	b.WriteString(e.Op)
	b.WriteString(": ")
	if e.Ctx != nil {
		b.WriteString(e.Ctx.Error())
		b.WriteString(" while dialling; ")
	}
	b.WriteString("every broker tried failed to connect: ")
	for i, d := range e.Dials {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(d.Error())
	}
	return b.String()
}

// Unwrap returns the context's error and each dial's error.
func (e *DialsError) Unwrap() []error {
	if e.Ctx == nil {
		return e.Dials
	}
	return append([]error{e.Ctx}, e.Dials...)
}
