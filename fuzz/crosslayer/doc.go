// Package crosslayer holds the fuzz targets that cross the layers of the
// module: a frame stream read through felix.Reader over arbitrarily split
// input, and every frame kind decoded, re-encoded and decoded again by the
// root codec and by the vector codecs (decode → describe → encode), which
// must agree with each other.
//
// The checks are plain functions ([RoundTrip], [ReadAll]) so that a test,
// a fuzz target or a debugging session can call them on one input; the
// fuzz targets are in the package's tests and are seeded from every vector
// directory of the repository ([VectorFrames]). Run them for a long
// campaign with fuzz/run.sh.
package crosslayer
