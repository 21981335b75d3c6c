package runs

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Artifact names written or collected by the harness (the cross-part
// contract; other producers define their own files' names).
const (
	MetadataFile   = "run-metadata.json"
	MetadataSchema = "mcpsidecar.run/v1"
)

// Metadata is run-metadata.json.
type Metadata struct {
	Schema   string    `json:"schema"`
	RunID    string    `json:"run_id"`
	Command  string    `json:"command"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Image    Image     `json:"image"`
	Engine   Engine    `json:"engine"`
	// Gateway is the egress gateway engine, when the run has a gateway.
	Gateway *Gateway `json:"gateway,omitempty"`
	// Question is the agent's question (run with the built-in agent; the
	// seed's when none was given).
	Question     string      `json:"question,omitempty"`
	Networks     []Network   `json:"networks"`
	Containers   []Container `json:"containers"`
	Phases       []Phase     `json:"phases"`
	Verdict      Verdict     `json:"verdict"`
	Degradations []string    `json:"degradations"`
	// Credentials says where each credential of the run lived: in the
	// gateway (the agent held a per-run placeholder) or in the sandbox (a
	// recorded softening). Names only, never a value.
	Credentials []Credential `json:"credentials,omitempty"`
	// Hardening is what each role reported about the layers it applied
	// (its harden-report.json), keyed by role.
	Hardening map[string]RoleHardening `json:"hardening,omitempty"`
	// Observed is what the host itself read of each role's process from
	// outside (/proc/<pid>/status), keyed by role: the kernel's account,
	// which no workload can forge.
	Observed map[string]Observation `json:"observed,omitempty"`
	// ArtifactProblems names workload files the host refused to copy
	// (links, special files, oversized) or could not read.
	ArtifactProblems []string `json:"artifact_problems,omitempty"`
	Kept             bool     `json:"kept,omitempty"`
	RemoveCommand    []string `json:"remove_command,omitempty"`
	ExitCode         int      `json:"exit_code"`
}

// Credential is one credential of a run: the host variable it came from,
// the host it is sent to, and where it lived.
type Credential struct {
	Variable string `json:"variable"`
	Host     string `json:"host"`
	Lives    string `json:"lives"` // "gateway" or "sandbox"
}

// Image is the image every container of the run used.
type Image struct {
	Tag       string `json:"tag"`
	Built     bool   `json:"built"`
	Method    string `json:"method,omitempty"` // "build", "import" or "reused"
	SizeBytes int64  `json:"size_bytes,omitempty"`
	// Binary is the binary the image was made of (internal/rolebin).
	Binary *ImageBinary `json:"binary,omitempty"`
}

// ImageBinary is the binary that went into the image: its kind, "role"
// (the slim role binary), "self" (the host binary), "full" (a full Linux
// binary of an older archive's linux-<arch>/) or MCPSIDECAR_IMAGE_BINARY
// (the binary that variable names); the path it was read from, its size
// and the SHA-256 of the bytes the image (and a workload's launcher) holds.
type ImageBinary struct {
	Kind      string `json:"kind"`
	Path      string `json:"path"`
	SizeBytes int64  `json:"size_bytes"`
	SHA256    string `json:"sha256"`
}

// Engine is the Docker daemon the run used.
type Engine struct {
	Version    string `json:"version"`
	APIVersion string `json:"api_version"`
	// Local says the engine's process ids are this host's (its API is a
	// unix socket here whose daemon runs in this host's pid namespace),
	// decided once per run. Only then does the host prove a container's
	// process (dockerx.Prove) and use it: enter its network namespace,
	// read its /proc. Locality says how it was decided, or why not. Both
	// are absent when it was not decided (the Kubernetes backend, a run
	// that stopped before, or a record older than the field).
	Local    bool   `json:"local,omitempty"`
	Locality string `json:"locality,omitempty"`
	// OS and Arch are the engine's system and machine in Go's names
	// (its /version): the image's binary is checked against them.
	// Machine is the machine as its /info reports it ("x86_64").
	OS      string `json:"os,omitempty"`
	Arch    string `json:"arch,omitempty"`
	Machine string `json:"machine,omitempty"`
	// Rootless is set for rootless Docker (its /info's security options
	// carry name=rootless); CgroupDriver is its cgroup driver ("none":
	// no resource limit is enforced).
	Rootless     bool   `json:"rootless,omitempty"`
	CgroupDriver string `json:"cgroup_driver,omitempty"`
	// Kernel is the engine's kernel as a role measured it from inside its
	// container, not this host's (absent when no role reported).
	Kernel *Kernel `json:"kernel,omitempty"`
}

// Kernel is the engine's kernel, measured inside a role's container
// before the role restricted itself (harden.Kernel): the Landlock ABI it
// has, whether the role's seccomp filter loaded, and the cgroup limits the
// container is under.
type Kernel struct {
	// Source is the report it comes from ("gateway's harden report"):
	// the role's claim, like every harden report.
	Source      string `json:"source"`
	Release     string `json:"release"`
	LandlockABI int    `json:"landlock_abi"`
	// Seccomp is "loaded", "refused: <error>", or empty when the role
	// stopped before trying.
	Seccomp string `json:"seccomp,omitempty"`
	Cgroup  string `json:"cgroup,omitempty"`
	// MemoryLimitBytes and PidsLimit are 0 when the cgroup sets none.
	MemoryLimitBytes int64  `json:"memory_limit_bytes"`
	PidsLimit        int64  `json:"pids_limit"`
	Error            string `json:"error,omitempty"`
}

// Gateway says which engine served as the egress gateway: "ours"
// (mcpsidecar gateway, in the run's image) or "squid" (Image).
type Gateway struct {
	Engine string `json:"engine"`
	Image  string `json:"image"`
}

// Network is one network of the run.
type Network struct {
	Name     string `json:"name"`
	ID       string `json:"id"`
	Internal bool   `json:"internal"`
}

// Container is one container of the run.
type Container struct {
	Role            string   `json:"role"`
	Name            string   `json:"name"`
	ID              string   `json:"id"`
	ExitCode        *int     `json:"exit_code"`
	Networks        []string `json:"networks"`
	Aliases         []string `json:"aliases"`
	PeakMemoryBytes uint64   `json:"peak_memory_bytes"`
	TimedOut        bool     `json:"timed_out,omitempty"`
	OOMKilled       bool     `json:"oom_killed,omitempty"`
}

// SourceRoleReport says a record comes from a role's own report: the
// workload wrote it in a directory it controls, so it is the workload's
// claim, not something the host verified.
const SourceRoleReport = "role report"

// RoleHardening is one role's hardening as its report claims it.
type RoleHardening struct {
	Source       string           `json:"source"`
	ABI          int              `json:"abi"` // enforced Landlock ABI, 0 when none
	KernelABI    int              `json:"kernel_abi"`
	Layers       []HardeningLayer `json:"layers"`
	Degradations []string         `json:"degradations"`
	Error        string           `json:"error,omitempty"` // the report's own error, or why it could not be read
	// Refused is the layer the role's policy required and the kernel
	// could not enforce: the role stopped with exit code 5.
	Refused *Refusal `json:"refused,omitempty"`
}

// Refusal is a required hardening layer the kernel could not enforce.
type Refusal struct {
	Layer     string `json:"layer"`
	KernelABI int    `json:"kernel_landlock_abi"`
	Reason    string `json:"reason"`
}

// Observation is one role's process as the host read it, after the role
// had written its hardening report.
type Observation struct {
	Seen           bool   `json:"seen"`
	Seccomp        int    `json:"seccomp"`
	SeccompFilters int    `json:"seccomp_filters"`
	NoNewPrivs     bool   `json:"no_new_privs"`
	CapEff         string `json:"cap_eff"`
	UID            int    `json:"uid"`
	Detail         string `json:"detail,omitempty"`
	// Unproven says why the host read nothing: the process the engine
	// named could not be shown to be the container's on this host
	// (dockerx.ErrNotOnThisHost). The check over it fails, with this
	// reason, and says nothing of the sandbox.
	Unproven string `json:"unproven,omitempty"`
}

// HardeningLayer is one layer of a role's hardening.
type HardeningLayer struct {
	Name     string `json:"name"`
	Required bool   `json:"required"`
	Enforced bool   `json:"enforced"`
	Detail   string `json:"detail,omitempty"`
}

// Phase is one step of the run with its timing.
type Phase struct {
	Name       string    `json:"name"`
	Start      time.Time `json:"start"`
	DurationMS float64   `json:"duration_ms"`
	OK         bool      `json:"ok"`
	Error      string    `json:"error,omitempty"`
}

// Verdict says whether the run did what it should.
type Verdict struct {
	OK     bool    `json:"ok"`
	Checks []Check `json:"checks"`
}

// Check is one verdict item.
type Check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"`
}

// Summary is one past run as `runs list` shows it.
type Summary struct {
	ID      string
	Path    string
	Meta    *Metadata // nil when run-metadata.json is missing or unreadable
	MetaErr error
}

// List returns the runs in dir, newest first.
func List(dir string) ([]Summary, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing runs in %s: %w", dir, err)
	}
	var out []Summary
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "run-") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		m, err := ReadMetadata(p)
		out = append(out, Summary{ID: e.Name(), Path: p, Meta: m, MetaErr: err})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID > out[j].ID })
	return out, nil
}

// ReadMetadata reads run-metadata.json of the run directory at path.
func ReadMetadata(path string) (*Metadata, error) {
	b, err := os.ReadFile(filepath.Join(path, MetadataFile))
	if err != nil {
		return nil, fmt.Errorf("reading run metadata: %w", err)
	}
	var m Metadata
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", filepath.Join(path, MetadataFile), err)
	}
	return &m, nil
}

// Resolve finds a run by path, by id in runsDir, or by a unique id prefix.
func Resolve(runsDir, ref string) (string, error) {
	if st, err := os.Stat(ref); err == nil && st.IsDir() && strings.ContainsRune(ref, filepath.Separator) {
		return ref, nil
	}
	if strings.ContainsAny(ref, `/\`) || ref == "" || ref == "." || ref == ".." {
		return "", fmt.Errorf("run %q: not found", ref)
	}
	all, err := List(runsDir)
	if err != nil {
		return "", err
	}
	var hits []string
	for _, s := range all {
		if s.ID == ref {
			return s.Path, nil
		}
		if strings.HasPrefix(s.ID, ref) {
			hits = append(hits, s.ID)
		}
	}
	switch len(hits) {
	case 1:
		return filepath.Join(runsDir, hits[0]), nil
	case 0:
		return "", fmt.Errorf("run %q: not found in %s", ref, runsDir)
	}
	return "", fmt.Errorf("run %q: ambiguous, matches %s", ref, strings.Join(hits, ", "))
}

// Latest returns the path of the newest run in runsDir.
func Latest(runsDir string) (string, error) {
	all, err := List(runsDir)
	if err != nil {
		return "", err
	}
	if len(all) == 0 {
		return "", fmt.Errorf("no runs in %s", runsDir)
	}
	return all[0].Path, nil
}

// IDs returns the ids of the runs in runsDir, newest first, for shell
// completion; an unreadable directory has none.
func IDs(runsDir string) []string {
	all, _ := List(runsDir)
	ids := make([]string, 0, len(all))
	for _, s := range all {
		ids = append(ids, s.ID)
	}
	return ids
}

// Summary is k in one line, as doctor prints it: "Linux 6.18.44,
// Landlock ABI 7, seccomp filter loaded, cgroup v1: memory limit
// 268435456 bytes, pids limit 256".
func (k Kernel) Summary() string {
	parts := []string{"Linux " + cmp.Or(k.Release, "(release unknown)"), fmt.Sprintf("Landlock ABI %d", k.LandlockABI)}
	switch {
	case k.Seccomp == "":
		parts = append(parts, "seccomp filter not tried (the role stopped before)")
	case k.Seccomp == "loaded":
		parts = append(parts, "seccomp filter loaded")
	default:
		parts = append(parts, "seccomp filter "+k.Seccomp)
	}
	limit := func(name string, n int64, unit string) string {
		if n == 0 {
			return "no " + name + " limit"
		}
		return fmt.Sprintf("%s limit %d%s", name, n, unit)
	}
	cg := limit("memory", k.MemoryLimitBytes, " bytes") + ", " + limit("pids", k.PidsLimit, "")
	if k.Cgroup != "" {
		cg = "cgroup " + k.Cgroup + ": " + cg
	}
	if k.Error != "" {
		cg += " (" + k.Error + ")"
	}
	return strings.Join(append(parts, cg), ", ")
}
