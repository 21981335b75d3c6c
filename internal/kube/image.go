package kube

import (
	"bytes"
	"context"
	"fmt"
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
// containerd on this machine without a registry: docker save piped into
// ctr's import, in the namespace the kubelet's CRI uses (k8s.io). It is
// for a cluster whose node is this machine (the test cluster of
// scripts/kube-test-cluster.sh); a real cluster takes the image from a
// registry. The Docker and ctr command-line tools are used, not the
// engine's API: dockerx has no image export, and ctr is the client the
// containerd package ships.
//
// An image the containerd already holds under the tag is not imported
// again: our tags are content hashes (spec.ImageTag), so the same tag is
// the same image.
func ImportToContainerd(ctx context.Context, socket, tag string) error {
	ls := exec.CommandContext(ctx, "ctr", "--address", socket, "-n", "k8s.io", "images", "ls", "-q", "name=="+containerdName(tag))
	if out, err := ls.Output(); err == nil && strings.TrimSpace(string(out)) == containerdName(tag) {
		return nil
	}
	save := exec.CommandContext(ctx, "docker", "save", tag)
	imp := exec.CommandContext(ctx, "ctr", "--address", socket, "-n", "k8s.io", "images", "import", "-")
	pipe, err := save.StdoutPipe()
	if err != nil {
		return fmt.Errorf("importing %s: %w", tag, err)
	}
	imp.Stdin = pipe
	var saveErr, impOut bytes.Buffer
	save.Stderr, imp.Stdout, imp.Stderr = &saveErr, &impOut, &impOut
	if err := save.Start(); err != nil {
		return fmt.Errorf("importing %s: starting docker save: %w", tag, err)
	}
	if err := imp.Run(); err != nil {
		_ = save.Process.Kill()
		_ = save.Wait()
		return fmt.Errorf("importing %s into containerd %s: ctr: %w: %s", tag, socket, err, strings.TrimSpace(impOut.String()))
	}
	if err := save.Wait(); err != nil {
		return fmt.Errorf("importing %s: docker save: %w: %s", tag, err, strings.TrimSpace(saveErr.String()))
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
