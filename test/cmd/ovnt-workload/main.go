// Command ovnt-workload is the process the test kubelet runs in every pod: it answers each TCP
// connection, UDP datagram and SCTP INIT on the pod's declared ports with one line,
// "<namespace>/<pod> <client-ip>" (see package probe), so a test learns which backend
// answered and which client address it saw.
//
//	ovnt-workload --name default/web --tcp 8080 --udp 8080 --sctp 8080 [--ready-file PATH]
//
// It writes --ready-file once every port is bound (the kubelet reports the pod Ready only
// then) and exits 0 on SIGTERM or SIGINT.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/ovn-transparent/ovn-transparent/test/probe"
)

// ports is a repeatable port flag; "--tcp 80,443" works as well as "--tcp 80 --tcp 443".
type ports []uint16

func (p *ports) String() string { return fmt.Sprint(*p) }

func (p *ports) Set(v string) error {
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.ParseUint(strings.TrimSpace(f), 10, 16)
		if err != nil || n == 0 {
			return fmt.Errorf("bad port %q", f)
		}
		*p = append(*p, uint16(n))
	}
	return nil
}

func main() {
	var srv probe.Server
	var tcp, udp, sctp ports
	flag.StringVar(&srv.Name, "name", "", "`namespace/pod` this workload answers as (required)")
	flag.Var(&tcp, "tcp", "TCP `port` to answer on (repeatable)")
	flag.Var(&udp, "udp", "UDP `port` to answer on (repeatable)")
	flag.Var(&sctp, "sctp", "SCTP `port` to answer INITs on (repeatable; raw socket)")
	readyFile := flag.String("ready-file", "", "`path` written once every port is bound")
	flag.Parse()
	if srv.Name == "" || flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	log.SetPrefix("ovnt-workload " + srv.Name + ": ")
	srv.TCP, srv.UDP, srv.SCTP = tcp, udp, sctp
	srv.Logf = log.Printf

	// Signals are caught before binding, so a SIGTERM right after start still exits cleanly.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	if err := srv.Start(); err != nil {
		log.Fatal(err)
	}
	if *readyFile != "" {
		if err := writeAtomic(*readyFile, fmt.Sprintf("%d\n", os.Getpid())); err != nil {
			srv.Close()
			log.Fatal(err)
		}
	}
	log.Printf("serving tcp %v udp %v sctp %v", tcp, udp, sctp)
	s := <-sig
	log.Printf("%v: stopping", s)
	if err := srv.Close(); err != nil {
		log.Fatal(err)
	}
}

// writeAtomic writes path through a rename, so a reader polling for it never sees it half
// written.
func writeAtomic(path, content string) error {
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
