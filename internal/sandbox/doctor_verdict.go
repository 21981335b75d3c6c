package sandbox

import (
	"github.com/mcpsidecar/mcpsidecar/internal/enginever"
)

func (j *job) oldEngine() bool {
	return enginever.Before(j.meta.Engine.Version, minEngineMajor)
}
