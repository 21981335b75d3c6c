//go:build !unix

package kube

import (
	"context"
	"errors"
	"runtime"
)

// lockImport refuses: importing the image goes through the cluster node's
// containerd socket on this host, which a Windows host does not have.
func lockImport(context.Context, string) (func(), error) {
	return nil, errors.New("importing the image into the cluster's containerd needs its socket on this host, which " + runtime.GOOS + " does not have: push the image to a registry the cluster pulls from")
}
