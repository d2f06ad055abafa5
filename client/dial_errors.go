package client

import "strings"

// DialsError ends a call whose context expired while the client was
// dialling, after dials of more than one broker failed: it names every
// broker tried with the last failure of its dial (each a *conn.DialError
// naming the address and the cause: no answer within the real wait, a
// certificate refused, ...). errors.Is matches the context's error
// (context.DeadlineExceeded) and everything each dial's error matches;
// errors.As finds the dials' *conn.DialError. A call that tried one
// broker returns that broker's *conn.DialError itself.
type DialsError struct {
	// Op is the call ("connect", "publish", "subscribe", ...).
	Op string
	// Ctx is the context's error.
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
	b.WriteString(e.Ctx.Error())
	b.WriteString(" while dialling; every broker tried failed: ")
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
	return append([]error{e.Ctx}, e.Dials...)
}
