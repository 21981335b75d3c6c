package kube

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"
)

// ImageImport is how [ImportToContainerd] is named on the command line:
// "containerd:SOCKET".
const ImageImport = "containerd:"

// ParseImageImport reads "containerd:SOCKET" and returns the socket.
func ParseImageImport(s string) (string, error) {
	sock, ok := strings.CutPrefix(s, ImageImport)
	if !ok || sock == "" || !strings.HasPrefix(sock, "/") {
		return "", fmt.Errorf("image import %q: want %sSOCKET with an absolute socket path (a node's containerd on this machine)", s, ImageImport)
	}
	return sock, nil
}

// ImportToContainerd brings an image of the local Docker engine to a
// containerd on this machine without a registry: the engine's image
// archive (save, the Docker API's export) piped into ctr's import, in the
// namespace the kubelet's CRI uses (k8s.io). It is for a cluster whose
// node is this machine (the test cluster of scripts/kube-test-cluster.sh);
// a real cluster takes the image from a registry. ctr is the client the
// containerd package ships.
//
// An image the containerd already holds under the tag is not imported
// again: our tags are content hashes (spec.ImageTag), so the same tag is
// the same image.
//
// Imports into one containerd are made one at a time (a lock file per
// socket): containerd 1.6 fails two concurrent imports of the same layers
// ("content digest … not found"), which concurrent runs of one binary make.
func ImportToContainerd(ctx context.Context, socket, tag string, save func(context.Context, string) (io.ReadCloser, error)) error {
	has := func() bool {
		ls := exec.CommandContext(ctx, "ctr", "--address", socket, "-n", "k8s.io", "images", "ls", "-q", "name=="+containerdName(tag))
		out, err := ls.Output()
		return err == nil && strings.TrimSpace(string(out)) == containerdName(tag)
	}
	if has() {
		return nil
	}
	unlock, err := lockImport(ctx, socket)
	if err != nil {
		return fmt.Errorf("importing %s: %w", tag, err)
	}
	defer unlock()
	if has() { // imported by a run that held the lock before us
		return nil
	}
	archive, err := save(ctx, tag)
	if err != nil {
		return fmt.Errorf("importing %s: %w", tag, err)
	}
	defer archive.Close()
	imp := exec.CommandContext(ctx, "ctr", "--address", socket, "-n", "k8s.io", "images", "import", "-")
	var impOut bytes.Buffer
	imp.Stdin, imp.Stdout, imp.Stderr = archive, &impOut, &impOut
	if err := imp.Run(); err != nil {
		return fmt.Errorf("importing %s into containerd %s: ctr: %w: %s", tag, socket, err, strings.TrimSpace(impOut.String()))
	}
	return nil
}

// containerdName is the name containerd gives a Docker short name
// ("foo:tag" is "docker.io/library/foo:tag").
func containerdName(tag string) string {
	first, _, _ := strings.Cut(tag, "/")
	switch {
	case !strings.Contains(tag, "/"):
		return "docker.io/library/" + tag
	case !strings.ContainsAny(first, ".:") && first != "localhost":
		return "docker.io/" + tag
	}
	return tag
}
