package spec

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
)

// Dockerfile is the runtime image every role runs: FROM scratch, so the
// image holds no shell, package manager, interpreter or dynamic loader for
// a compromised workload to use. The harness assembles the build context:
// the static binary as "mcpsidecar", the host's CA bundle as
// "ca-certificates.crt", and [Passwd] and [Group] as "passwd" and "group".
const Dockerfile = `FROM scratch
COPY mcpsidecar /mcpsidecar
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY passwd /etc/passwd
COPY group /etc/group
USER 65532:65532
ENTRYPOINT ["/mcpsidecar"]
`

// Passwd and Group are the image's /etc/passwd and /etc/group: root (for
// files owned by it) and the unprivileged user [User], with no login shell
// and a home on the /tmp tmpfs.
const (
	Passwd = "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/tmp:/sbin/nologin\n"
	Group  = "root:x:0:\nnonroot:x:65532:\n"
)

// ImageRepository is the local repository of the runtime image.
const ImageRepository = "mcpsidecar"

// ImageTag names the runtime image by content: "mcpsidecar:" and 16 hex
// digits of SHA-256 over the Dockerfile and the binary, so a changed
// binary can never reuse a stale image. Lengths are hashed too, so the
// boundary between the two inputs cannot shift.
func ImageTag(dockerfile []byte, binary io.Reader) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "dockerfile %d\n", len(dockerfile))
	h.Write(dockerfile)
	n, err := io.Copy(h, binary)
	if err != nil {
		return "", fmt.Errorf("hashing binary: %w", err)
	}
	fmt.Fprintf(h, "\nbinary %d\n", n)
	return ImageRepository + ":" + hex.EncodeToString(h.Sum(nil))[:16], nil
}
