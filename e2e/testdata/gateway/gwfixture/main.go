// Command gwfixture is the gateway end-to-end test's fixture, run in
// containers on the test's own internal Docker networks:
//
//	gwfixture serve NAME [PORT...] answer "fixture NAME" over HTTP on each
//	                              PORT (default 80 and 443)
//	gwfixture probe PROXY CASES   send each case through the proxy at PROXY
//	                              (host:port) and print one JSON result a line
//
// CASES is a JSON array of {"name","method","target","host"}: for CONNECT,
// target is host:port and, when the tunnel opens, a GET is sent through it;
// otherwise target is the absolute URI and host, when set, the Host header.
// It never dials anything but the proxy. It is a test fixture only.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

type probeCase struct {
	Name        string `json:"name"`
	Method      string `json:"method"`
	Target      string `json:"target"`
	Host        string `json:"host,omitempty"`
	Traceparent string `json:"traceparent,omitempty"`
}

type result struct {
	Name   string `json:"name"`
	Status int    `json:"status"`
	Body   string `json:"body"`
	Error  string `json:"error,omitempty"`
}

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: gwfixture serve NAME | probe PROXY CASES")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "serve":
		serve(os.Args[2], os.Args[3:])
	case "probe":
		if len(os.Args) != 4 {
			fmt.Fprintln(os.Stderr, "usage: gwfixture probe PROXY CASES")
			os.Exit(2)
		}
		probe(os.Args[2], os.Args[3])
	default:
		fmt.Fprintln(os.Stderr, "gwfixture: unknown mode", os.Args[1])
		os.Exit(2)
	}
}

func serve(name string, ports []string) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "fixture %s\n", name)
	})
	if len(ports) == 0 {
		ports = []string{"80", "443"}
	}
	errc := make(chan error, len(ports))
	for _, port := range ports {
		srv := &http.Server{Addr: ":" + port, Handler: h, ReadHeaderTimeout: 5 * time.Second}
		go func() { errc <- srv.ListenAndServe() }()
	}
	fmt.Fprintln(os.Stderr, "gwfixture:", <-errc)
	os.Exit(1)
}

func probe(proxy, casesJSON string) {
	var cases []probeCase
	if err := json.Unmarshal([]byte(casesJSON), &cases); err != nil {
		fmt.Fprintln(os.Stderr, "gwfixture: cases:", err)
		os.Exit(2)
	}
	enc := json.NewEncoder(os.Stdout)
	for _, c := range cases {
		r := one(proxy, c)
		r.Name = c.Name
		enc.Encode(r)
	}
}

func one(proxy string, c probeCase) result {
	conn, err := net.DialTimeout("tcp", proxy, 5*time.Second)
	if err != nil {
		return result{Error: err.Error()}
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(8 * time.Second))
	host := c.Host
	if host == "" && c.Method == "CONNECT" {
		host = c.Target
	}
	req := fmt.Sprintf("%s %s HTTP/1.1\r\n", c.Method, c.Target)
	if host != "" {
		req += "Host: " + host + "\r\n"
	} else if u := strings.SplitN(strings.TrimPrefix(c.Target, "http://"), "/", 2); len(u) > 0 {
		req += "Host: " + u[0] + "\r\n"
	}
	if c.Traceparent != "" {
		req += "Traceparent: " + c.Traceparent + "\r\n"
	}
	if _, err := io.WriteString(conn, req+"Connection: close\r\n\r\n"); err != nil {
		return result{Error: err.Error()}
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, &http.Request{Method: c.Method})
	if err != nil {
		return result{Error: err.Error()}
	}
	if c.Method != "CONNECT" || resp.StatusCode != 200 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return result{Status: resp.StatusCode, Body: string(b)}
	}
	io.WriteString(conn, "GET / HTTP/1.1\r\nHost: tunnel\r\nConnection: close\r\n\r\n")
	inner, err := http.ReadResponse(br, &http.Request{Method: "GET"})
	if err != nil {
		return result{Status: 200, Error: "inside tunnel: " + err.Error()}
	}
	b, _ := io.ReadAll(io.LimitReader(inner.Body, 4096))
	return result{Status: 200, Body: string(b)}
}
