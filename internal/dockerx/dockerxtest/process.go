package dockerxtest

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
)

// Locality is local unless NotLocal says why not.
func (f *Engine) Locality(context.Context) dockerx.Locality {
	if f.NotLocal != "" {
		return dockerx.Locality{Reason: f.NotLocal}
	}
	return dockerx.Locality{Local: true, Reason: "dockerxtest: a fake engine"}
}

// Process hands out a fake proven process for st.Pid, unless the engine is
// not local or ProcessErr fails it; its methods answer from the engine's
// fields and touch nothing of this host.
func (f *Engine) Process(ctx context.Context, id string, st dockerx.ContainerState) (dockerx.Process, error) {
	if l := f.Locality(ctx); !l.Local {
		return nil, fmt.Errorf("%w (%s)", dockerx.ErrNotOnThisHost, l.Reason)
	}
	if f.ProcessErr != nil {
		if err := f.ProcessErr(id); err != nil {
			return nil, err
		}
	}
	if st.Pid <= 0 {
		return nil, fmt.Errorf("%w (process %d is not a process id)", dockerx.ErrNotOnThisHost, st.Pid)
	}
	f.mu.Lock()
	f.Proven = append(f.Proven, fmt.Sprintf("%d %s", st.Pid, id))
	f.mu.Unlock()
	return &process{f: f, pid: st.Pid, id: id}, nil
}

// process is a fake [dockerx.Process].
type process struct {
	f   *Engine
	pid int
	id  string
}

func (p *process) Pid() int { return p.pid }

func (p *process) DialInNetns(ctx context.Context, addr string) (net.Conn, error) {
	return p.f.DialNetns(ctx, p.pid, addr)
}

func (p *process) Listening(port int) (bool, error) {
	if p.f.Listening == nil {
		return false, errors.New("dockerxtest: no listening sockets to read")
	}
	return p.f.Listening(p.pid, port)
}

func (p *process) DropDefaultRoutes() error {
	p.f.mu.Lock()
	defer p.f.mu.Unlock()
	p.f.Dropped = append(p.f.Dropped, fmt.Sprint(p.pid))
	return nil
}

func (p *process) WatchExit(stop <-chan struct{}) <-chan struct{} {
	if p.f.WatchExit == nil {
		return nil
	}
	return p.f.WatchExit(p.pid, p.id, stop)
}

func (p *process) RoleStatus() (dockerx.ProcStatus, error) {
	if p.f.Status == nil {
		return dockerx.ProcStatus{Seccomp: 2, SeccompFilters: 2, NoNewPrivs: true, UID: 65532}, nil
	}
	return p.f.Status(p.pid)
}

func (p *process) Mountinfo() ([]byte, error) {
	if p.f.Mountinfo == nil {
		return nil, errors.New("dockerxtest: no mountinfo to read")
	}
	return p.f.Mountinfo(p.pid)
}

func (p *process) Close() error { return nil }
