// Package conformance is the client conformance kit: the catalogue of
// client behaviours a Felix client binding is graded on (63 scenarios, 49
// of them required), the fixture description a test cluster writes for a
// suite, the results document a suite writes, and the verifier that grades
// it.
//
// A suite tags each test with a scenario id from [Scenarios], records its
// outcome with a [Recorder], and writes a [Results] document; [Verify]
// grades the document by the catalogue's verdict rules: a client is
// conformant when no required scenario is missing, skipped or failing, no
// scenario at all is failing, and no outcome names an id the catalogue
// lacks. The command "felix conformance verify RESULTS.json" prints the
// same report.
//
// The package depends on the standard library alone.
package conformance
