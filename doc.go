// Package felix is a pure codec for the Felix wire protocol v1: the 12-byte
// FLX1 frame header, flag and feature bits, JSON control messages, binary
// publish, ack and event batches, and capability negotiation.
//
// To publish, subscribe or use caches against a broker, use package
// client (github.com/flxproto/felix/client), the cluster-aware client;
// package conn is the single QUIC connection under it and the server half
// of a broker. This package is for encoding and decoding frames.
//
// It depends on the standard library alone and performs no I/O beyond the
// io.Reader / io.Writer helpers Reader and Writer. Encoders append to a
// caller's buffer (AppendX(dst, ...) []byte); decoders validate a whole
// payload and hand back typed values or iterators whose slices alias the
// input.
//
// Every error a decoder returns is an *Error wrapping one of the class
// sentinels (ErrTruncated, ErrBadMagic, ...), usable with errors.Is.
//
// Where this package is deliberately stricter than the upstream reference
// implementation: bytes left over after a complete binary layout are refused
// (ErrTrailingBytes; upstream ignores them), and flag bits that belong to a
// different layout are refused (ErrBadFlagCombination; upstream ignores them).
package felix
