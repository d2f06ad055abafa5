package interposer_test

import (
	"fmt"
	"time"

	"github.com/flxproto/felix/internal/broker/interposer"
)

// Put a relay in front of a broker, hand clients its address, and inject
// faults on command.
func Example() {
	r, err := interposer.Listen("127.0.0.1:0", "127.0.0.1:7447", nil)
	if err != nil {
		panic(err)
	}
	defer r.Close()
	fmt.Println("clients dial", r.Addr().Network())
	_ = r.Apply(interposer.FaultStall, 2*time.Second) // hold everything for 2 s
	r.Heal()                                          // ... or release it now
	r.Reset()                                         // kill every open connection
	fmt.Println(r.Apply("flap", 0))
	// Output:
	// clients dial udp
	// interposer: unknown fault "flap" (want drop, reset or stall)
}
