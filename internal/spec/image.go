package spec

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"sort"
)

// ImageContextDir is the build-context directory holding the image's root
// filesystem: the harness puts every file of the image under it at its
// final path, and the Dockerfile copies it in one layer.
const ImageContextDir = "rootfs"

// Dockerfile is the runtime image every role runs: FROM scratch, so the
// image holds no shell, package manager, interpreter or dynamic loader for
// a compromised workload to use. The files (the static binary as
// "mcpsidecar", the host's CA bundle, [Passwd] and [Group]) come in one
// COPY of [ImageContextDir]: each COPY is a layer the classic builder
// commits separately, and four of them made a cold build take 7.7 s.
const Dockerfile = `FROM scratch
COPY ` + ImageContextDir + `/ /
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

// ImageFile is one file of the image at its path in the image (no leading
// slash), as [ImageTag] hashes it.
type ImageFile struct {
	Path string
	Mode int64
	Data []byte
}

// ImageTag names the runtime image by content: "mcpsidecar:" and 16 hex
// digits of SHA-256 over the Dockerfile and every file of the image (path,
// mode and content, in path order), so no changed input — binary, CA
// bundle, passwd, group — can reuse a stale image. Lengths are hashed
// before contents, so the boundary between two inputs cannot shift.
func ImageTag(dockerfile []byte, files []ImageFile) string {
	sorted := append([]ImageFile(nil), files...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Path < sorted[j].Path })
	h := sha256.New()
	hashPart(h, "dockerfile", 0, dockerfile)
	for _, f := range sorted {
		hashPart(h, f.Path, f.Mode, f.Data)
	}
	return ImageRepository + ":" + hex.EncodeToString(h.Sum(nil))[:16]
}

func hashPart(h hash.Hash, name string, mode int64, data []byte) {
	fmt.Fprintf(h, "%d:%s %o %d\n", len(name), name, mode, len(data))
	h.Write(data)
}
