package conformance_test

import (
	"fmt"
	"os"

	"github.com/flxproto/felix/conformance"
)

func ExampleVerify() {
	res := conformance.Results{Client: "felix-go", Version: "0.3.0", Outcomes: []conformance.Outcome{
		{ID: "pubsub.roundtrip", Status: conformance.StatusPass},
		{ID: "ack.offset_negotiated", Status: conformance.StatusFail, Detail: "offset member sent"},
		{ID: "queue.dead_letters_are_listable_and_redrivable", Status: conformance.StatusSkip, Detail: "not exposed yet"},
	}}
	rep := conformance.Verify(res)
	fmt.Println(rep.Passed, rep.Failed, rep.Unproven, rep.RequiredMissing, rep.OptionalNotRun)
	fmt.Println(rep.Lines[0])
	fmt.Println(rep.Lines[1])
	fmt.Println(rep.Verdict())
	// Output:
	// 0 1 1 48 13
	// FAIL [optional] ack.offset_negotiated ack offsets only when offered
	// UNPROVEN [required] pubsub.roundtrip a published record comes back unchanged: pubsub.roundtrip records no observation (wants offset, payload_bytes)
	// NOT CONFORMANT
}

func ExampleRecorder() {
	rec := conformance.NewRecorder("felix-go", "dev")
	if err := rec.Pass("pubsub.roundtrip", conformance.Evidence{"offset": 41, "payload_bytes": 263}); err != nil {
		panic(err)
	}
	// A pass without the observations its scenario names is refused.
	fmt.Println(rec.Pass("pubsub.order", nil))
	rec.Skip("sharded.resumes_per_shard", "no per-shard resume yet")
	if err := rec.Results().Write(os.Stdout); err != nil {
		panic(err)
	}
	// Output:
	// conformance: record "pubsub.order": a pass without its evidence: pubsub.order records no observation (wants delivered, records)
	// {
	//   "format": 2,
	//   "client": "felix-go",
	//   "version": "dev",
	//   "outcomes": [
	//     {
	//       "id": "pubsub.roundtrip",
	//       "status": "pass",
	//       "evidence": {
	//         "offset": 41,
	//         "payload_bytes": 263
	//       }
	//     },
	//     {
	//       "id": "sharded.resumes_per_shard",
	//       "status": "skip",
	//       "detail": "no per-shard resume yet"
	//     }
	//   ]
	// }
}

func ExampleLookup() {
	s, _ := conformance.Lookup("fault.publish_through_a_stalled_link")
	fmt.Println(s.Required, s.Step.During, s.Step.Fault, s.Step.AfterRecords, s.Step.Records, s.Step.HoldMS)
	// Output:
	// true publish stall 3 10 2000
}
