// Command nettest is the test workload image of scripts/kube-test-cluster.sh
// smoke: a FROM scratch image with one static binary.
//
//	nettest serve ADDR   listen on ADDR (e.g. :8080) and answer each TCP
//	                     connection with "nettest-ok <hostname>\n"
//	nettest dial ADDR    connect to ADDR once, print the answer, exit 0 on
//	                     "nettest-ok", 1 otherwise
//	nettest routes -     print the pod's IPv4 routes (/proc/net/route) and exit 1
//	                     if one of them is a default route: the test cluster's
//	                     pods must have none (no way off the machine)
//
// It never resolves names: the smoke check gives it pod IP addresses only.
package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strings"
	"time"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: nettest serve ADDR | nettest dial ADDR | nettest routes -")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2])
	case "dial":
		err = dial(os.Args[2])
	case "routes":
		err = routes()
	default:
		err = fmt.Errorf("unknown mode %q (want serve or dial)", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "nettest:", err)
		os.Exit(1)
	}
}

func serve(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", addr, err)
	}
	host, _ := os.Hostname()
	fmt.Println("listening on", ln.Addr())
	for {
		c, err := ln.Accept()
		if err != nil {
			return fmt.Errorf("accepting: %w", err)
		}
		fmt.Fprintf(c, "nettest-ok %s\n", host)
		fmt.Println("answered", c.RemoteAddr())
		c.Close()
	}
}

func dial(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return fmt.Errorf("dialing %s: %w", addr, err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return fmt.Errorf("reading from %s: %w", addr, err)
	}
	fmt.Print(line)
	if !strings.HasPrefix(line, "nettest-ok") {
		return fmt.Errorf("unexpected answer %q from %s", line, addr)
	}
	return nil
}

// routes reads the routing table instead of trying a packet: a probe sent to an
// outside address would leave the machine if the setup were wrong.
func routes() error {
	b, err := os.ReadFile("/proc/net/route")
	if err != nil {
		return fmt.Errorf("reading routes: %w", err)
	}
	fmt.Print(string(b))
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 7 && f[1] == "00000000" && f[7] == "00000000" {
			return fmt.Errorf("default route via interface %s", f[0])
		}
	}
	fmt.Println("no default route")
	return nil
}
