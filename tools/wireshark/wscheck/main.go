// Command wscheck checks the Wireshark dissector tools/wireshark/felix.lua
// with tshark; tools/wireshark/test.sh runs it.
//
//	wscheck vectors -lua felix.lua [-work DIR] VECTORDIR...
//	wscheck live -lua felix.lua -pcap capture.pcapng -keylog keys.log -session TAPPORT,BROKERPORT,TAPLOG[,alpn] ...
//	wscheck streams -lua felix.lua
//	wscheck differ -lua felix.lua [-n 4] [-seed 1] VECTORDIR...
//	wscheck freeport
//
// vectors writes every vector of the directories and those below them
// (vectors/FORMAT.md) into
// a pcap of exported PDUs, one frame per packet handed to the dissector
// "felix", runs tshark on it and compares each dissected frame with its
// .json: the decoded members for a valid vector, the error class
// (felix.error) for an invalid one.
//
// streams feeds built-in byte streams, cut into pieces, through the
// dissector's stream reassembly (the test entry point felix_stream_test)
// and checks which frames, errors and frame starts each packet shows:
// several frames in one piece, a frame over three pieces, retransmitted
// and reordered pieces, an unknown flag bit skipped, a bad magic, a
// length over the limit, and a stream ending inside a header or payload.
//
// differ mutates every vector (bytes changed, frames cut or extended, flag
// bits flipped, lengths changed; reproducible from -seed) and checks that
// the dissector's felix.error is the class the Go codec gives each
// variant, or, when the codec decodes it, that the dissector shows no
// error and the fields of the codec's members.
//
// freeport prints a free UDP port.
//
// live compares a decrypted capture of real traffic through felix tap
// with the tap's log: the QUIC connections on each tap's client-facing
// port must carry exactly the frames the tap logged, stream by stream and
// in order, each dissected with the members the tap decoded; a tap marked
// alpn must have negotiated ALPN felix/1 on every connection, the others
// none.
package main

import (
	"fmt"
	"net"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "vectors":
		err = runVectors(os.Args[2:])
	case "live":
		err = runLive(os.Args[2:])
	case "streams":
		err = runStreams(os.Args[2:])
	case "differ":
		err = runDiffer(os.Args[2:])
	case "freeport":
		err = freePort()
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "wscheck:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: wscheck vectors|streams|differ|live|freeport [flags]")
	os.Exit(2)
}

// freePort prints a UDP port on 127.0.0.1 that was free a moment ago.
func freePort() error {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer pc.Close()
	fmt.Println(pc.LocalAddr().(*net.UDPAddr).Port)
	return nil
}
