// Command pause is the sandbox ("pause") image of the test cluster made by
// scripts/kube-test-cluster.sh: it holds a pod's namespaces open and does
// nothing else. It sleeps until SIGINT or SIGTERM and then exits 0, like
// registry.k8s.io/pause, which this machine cannot pull (no registry).
//
// It is built with CGO_ENABLED=0 into a FROM scratch image, so the image holds
// one static binary and nothing else.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
}
