module github.com/mcpsidecar/mcpsidecar/scripts/kube/images

go 1.26
