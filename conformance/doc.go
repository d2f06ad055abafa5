// Package conformance is the client conformance kit: the catalogue of
// client behaviours a Felix client binding is graded on (63 scenarios, 49
// of them required), the fixture description a test cluster writes for a
// suite, the results document a suite writes, and the verifier that grades
// it.
//
// A suite tags each test with a scenario id from [Scenarios], records its
// outcome with a [Recorder], and writes a [Results] document. A pass is
// recorded only with its [Evidence]: the observations (offsets, counts,
// redirects, delays, error codes) the scenario's catalogue entry names in
// [Scenario.Evidence], each checked by its [Kind] — a list of offsets must
// be contiguous, a resume's offsets must continue the ones before the
// fault, a count of retries that must not happen must be 0
// ([CheckEvidence]). [Recorder.Track] records a test that returned
// without recording a pass as failed: not failing proves nothing.
//
// [Verify] grades the document by the catalogue's verdict rules and one of
// this repository's: a client is conformant when no required scenario is
// missing, skipped or failing, no scenario at all is failing, every pass
// carries its evidence (a pass without it is UNPROVEN, counted as neither
// passed nor failed), and no outcome names an id the catalogue lacks. The
// document is versioned by its "format" member ([ResultsFormat], 2):
// upstream's document (format 1, no such member) carries no evidence, so
// its passes grade as unproven. The command "felix conformance verify
// RESULTS.json" prints the same report.
//
// The package depends on the standard library alone.
package conformance
