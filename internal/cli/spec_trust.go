package cli

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpsidecar/mcpsidecar/internal/spec"
	"github.com/mcpsidecar/mcpsidecar/internal/spectrust"
)

// specTrustListSchema names the shape of `spec trust --list --json`.
const specTrustListSchema = "mcpsidecar.spec-trust/v1"

// trustOptions are the flags of `spec trust` and `spec untrust`.
type trustOptions struct {
	specOptions
	list bool // --list
}

const trustLong = `A sandbox_spec.toml found in the working directory (run, doctor,
test-sandbox and mcp pin without --spec) is refused with exit 6 when it softens the sandbox
beyond the built-in default (mcpsidecar spec default) and you have not trusted
its exact content: a variable or credential read from the host (from_host,
[[credentials]]), a capability the default lacks (shell_access),
credentials_in_sandbox, or egress the default does not open (a domain outside
its rules, a port, an IP rule). The working directory is often a repository
someone else wrote; one line of its spec could give the agent a shell, your
secrets, or a route to the writer's server.

spec trust [FILE] prints those softenings and records the file's absolute
path and the sha256 of its content in your trust store
(<user config dir>/mcpsidecar/trusted-specs.json). Any change to the file needs
trust again; the refusal marks the softenings the trusted version did not
have. A spec named with --spec is your choice and needs no trust.

For CI: --trust-spec accepts the working directory's spec for one invocation
(its softenings printed, nothing recorded), and ` + envTrustSpec + `=<sha256>
accepts only the content with that hash.`

func newSpecTrustCmd(s Streams) *cobra.Command {
	var o trustOptions
	cmd := &cobra.Command{
		Use:   "trust [FILE]",
		Short: "Trust a spec file's exact content (default ./" + workdirSpec + "); --list shows what you trusted",
		Long:  trustLong,
		Args:  cobra.MaximumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			if o.list {
				if len(args) > 0 || o.path != "" {
					return usageErrorf("--list takes no FILE")
				}
				return specTrustList(s, o.json)
			}
			if o.json {
				return usageErrorf("--json goes with --list")
			}
			if err := o.takeFileArg(args); err != nil {
				return err
			}
			return specTrust(s, o.path)
		},
	}
	cmd.Flags().StringVar(&o.path, "spec", "", "spec file to trust (default ./"+workdirSpec+")")
	cmd.Flags().BoolVar(&o.list, "list", false, "list the trusted spec files and whether each still has the content trusted")
	cmd.Flags().BoolVar(&o.json, "json", false, "with --list: print the list as JSON")
	return cmd
}

func newSpecUntrustCmd(s Streams) *cobra.Command {
	var o specOptions
	cmd := &cobra.Command{
		Use:   "untrust [FILE]",
		Short: "Forget the trust of a spec file (default ./" + workdirSpec + ")",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			if err := o.takeFileArg(args); err != nil {
				return err
			}
			return specUntrust(s, orDefault(o.path, workdirSpec))
		},
	}
	cmd.Flags().StringVar(&o.path, "spec", "", "spec file to forget (default ./"+workdirSpec+"; it need not exist any more)")
	return cmd
}

// specTrust shows the softenings of the spec at path (default
// ./sandbox_spec.toml) and records its content as trusted. An invalid
// spec is refused: what it softens cannot be said.
func specTrust(s Streams, path string) error {
	path = orDefault(path, workdirSpec)
	c := chooseAndRead(path)
	if c.err != nil {
		return invalidSpec(s, c.err, true)
	}
	soft, err := spec.BeyondDefault(c.profile)
	if err != nil {
		return err
	}
	st, abs, err := trustStore(path)
	if err != nil {
		return err
	}
	e := spectrust.Entry{Path: abs, SHA256: spectrust.Hash(c.data), Trusted: time.Now().UTC(), Softenings: soft}
	if len(soft) == 0 {
		fmt.Fprintf(s.Out, "%s softens nothing beyond the built-in default (it needs no trust); recording it anyway\n", path)
	} else {
		fmt.Fprintf(s.Out, "%s softens the sandbox beyond the built-in default:\n", path)
		writeLedger(s.Out, soft, nil)
	}
	if err := st.Trust(e); err != nil {
		return err
	}
	_, err = fmt.Fprintf(s.Out, "trusted: %s (sha256 %s), recorded in %s\n", abs, e.SHA256, st.Path())
	return err
}

func specUntrust(s Streams, path string) error {
	st, abs, err := trustStore(path)
	if err != nil {
		return err
	}
	found, err := st.Untrust(abs)
	if err != nil {
		return err
	}
	if !found {
		return usageErrorf("%s is not trusted (see mcpsidecar spec trust --list)", abs)
	}
	_, err = fmt.Fprintf(s.Out, "untrusted: %s\n", abs)
	return err
}

// trustedSpec is one line of `spec trust --list`.
type trustedSpec struct {
	spectrust.Entry
	// Status is "trusted" (the file has the content trusted), "changed"
	// or "missing" (no such file now).
	Status string `json:"status"`
}

func specTrustList(s Streams, asJSON bool) error {
	dir, err := spectrust.DefaultDir()
	if err != nil {
		return err
	}
	entries, err := spectrust.Store{Dir: dir}.List()
	if err != nil {
		return err
	}
	list := make([]trustedSpec, len(entries))
	for i, e := range entries {
		list[i] = trustedSpec{Entry: e, Status: fileStatus(e)}
		if list[i].Softenings == nil {
			list[i].Softenings = []spec.Softening{}
		}
	}
	if asJSON {
		return writeJSONDoc(s.Out, specTrustListSchema, map[string]any{"store": spectrust.Store{Dir: dir}.Path(), "specs": list})
	}
	return printTrustList(s.Out, list)
}

func printTrustList(w io.Writer, list []trustedSpec) error {
	if len(list) == 0 {
		_, err := fmt.Fprintln(w, "no trusted spec files")
		return err
	}
	for _, t := range list {
		fmt.Fprintf(w, "%-8s %s  sha256 %s  trusted %s  %d softening(s)\n",
			t.Status, t.Path, short(t.SHA256), t.Trusted.Local().Format(time.DateTime), len(t.Softenings))
	}
	return nil
}

// fileStatus compares a trusted entry with the file as it is now.
func fileStatus(e spectrust.Entry) string {
	if !fileExists(e.Path) {
		return "missing"
	}
	if data, err := spec.ReadFile(e.Path); err != nil || spectrust.Hash(data) != e.SHA256 {
		return "changed"
	}
	return "trusted"
}
