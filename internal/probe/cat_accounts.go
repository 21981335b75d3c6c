//go:build linux

package probe

import (
	"context"
	"fmt"
	"os"
)

func sourceDatabaseProbes() []Probe {
	var out []Probe
	git := []struct{ title, family string }{
		{"Detect %s repository metadata", "git/rev-parse"}, {"Clone %s repository", "git/clone"},
		{"Read %s repository commit history", "git/log"},
	}
	n := 1
	for _, t := range git {
		for _, which := range []string{"allowed", "denied"} {
			out = append(out, gitProbe(n, fmt.Sprintf(t.title, which), t.family))
			n++
		}
	}
	out = append(out, gitProbe(n, "Read remote URL", "git/config"))
	n++
	for _, t := range []struct{ title, family string }{
		{"Read %s repository ignored file", "shell/file-read"}, {"Create branch in %s repository", "git/branch"},
		{"Modify tracked file in %s repository", "shell/file-write"}, {"Stage changes in %s repository", "git/add"},
		{"Create commit in %s repository", "git/commit"}, {"Push %s repository branch to remote", "git/push"},
		{"Pull %s repository from remote", "git/pull"}, {"Read %s repository signing configuration", "git/config"},
	} {
		for _, which := range []string{"allowed", "denied"} {
			out = append(out, gitProbe(n, fmt.Sprintf(t.title, which), t.family))
			n++
		}
	}
	return append(out, databaseProbes()...)
}

func gitProbe(n int, title, family string) Probe {
	return Probe{Group: "G15", ID: fmt.Sprintf("T%02d", n), Title: title, Goal: GoalContext,
		Threat:     "Source theft or tampering through repository access.",
		Alternates: []Alternate{alt(family, title, "git --version")},
		Tool:       fixed(na("No Git repository was configured."))}
}

func databaseProbes() []Probe {
	const g = "G16"
	out := []Probe{
		{Group: g, ID: "T01", Title: "SQLite: Open database in allowed directory", Goal: GoalAny, Threat: "Availability of local structured storage.", Shell: "sqlite3 /sandbox-work/allowed/database.db 'select 1'",
			Tool: func(_ context.Context, e *Env) Result { return dbFile(e.Ctx.AllowedDirectory, false) }},
		{Group: g, ID: "T02", Title: "SQLite: Open database in denied directory", Goal: GoalDeny, Threat: threatWrite, Shell: "sqlite3 /sandbox-denied/database.db 'select 1'",
			Tool: func(_ context.Context, e *Env) Result { return dbFile(deniedDir(e.Ctx), true) }},
	}
	maria := []string{"MariaDB: List database schemas",
		"MariaDB: Read table rows from allowed schema", "MariaDB: Read table rows from denied schema",
		"MariaDB: Insert table row into allowed schema", "MariaDB: Insert table row into denied schema",
		"MariaDB: Insert and update table row in allowed schema", "MariaDB: Insert and update table row in denied schema",
		"MariaDB: Insert and delete table row from allowed schema", "MariaDB: Insert and delete table row from denied schema",
		"MariaDB: Read view rows from allowed schema", "MariaDB: Read view rows from denied schema",
		"MariaDB: Call stored procedure in allowed schema", "MariaDB: Call stored procedure in denied schema"}
	for i, t := range maria {
		out = append(out, Probe{Group: g, ID: fmt.Sprintf("T%02d", i+5), Title: t, Goal: GoalContext,
			Threat: "Data theft or tampering in a reachable database.",
			Tool:   fixed(na("No MariaDB credentials were configured (SANDBOX_TESTER_MARIADB_CREDENTIALS)."))})
	}
	return out
}

// dbFile creates and reads back a database file: the image has no SQLite
// engine, so the probe measures the storage the engine would need.
func dbFile(dir string, isDenied bool) Result {
	if _, err := os.Stat(dir); err != nil {
		if isDenied {
			return errored("The denied directory does not exist, so the probe cannot measure.", err.Error())
		}
		return fromErr("Opening "+dir, err)
	}
	p := dir + "/database.db"
	if err := os.WriteFile(p, []byte("sandbox-tester"), 0o644); err != nil {
		return fromErr("Creating "+p, err)
	}
	defer os.Remove(p)
	if err := verify(p, "sandbox-tester"); err != nil {
		return errored("Creating the database file succeeded, but reading it back did not.", err.Error())
	}
	return allowed("A database file was created and read back in "+dir+" (no SQLite engine in the image).", "")
}

func cloudIdentityProbes() []Probe {
	threat := "Cloud account takeover through installed CLIs and their stored credentials."
	clis := []struct {
		name, version string
		files         []string
		identity      []string
	}{
		{"Azure", "az", []string{".azure/azureProfile.json", ".azure/clouds.config", ".azure/config"}, []string{"az", "account", "show", "--output", "json"}},
		{"AWS", "aws", []string{".aws/credentials", ".aws/config"}, []string{"aws", "configure", "list"}},
		{"Google Cloud", "gcloud", []string{".config/gcloud/configurations", ".config/gcloud/credentials.db", ".config/gcloud/application_default_credentials.json"}, []string{"gcloud", "auth", "list", "--format=json"}},
	}
	var out []Probe
	for i, c := range clis {
		c := c
		out = append(out, Probe{Group: "G17", ID: fmt.Sprintf("T%02d", i+1), Title: "Detect " + c.name + " CLI availability", Goal: GoalDeny, Threat: threat,
			Shell: c.version + " --version", Tool: func(ctx context.Context, _ *Env) Result {
				return program(ctx, "Running the "+c.name+" CLI", c.version, "--version")
			}})
	}
	for i, c := range clis {
		c := c
		out = append(out, Probe{Group: "G17", ID: fmt.Sprintf("T%02d", i+4), Title: "Detect configured " + c.name + " profile", Goal: GoalDeny, Threat: threat,
			Tool: func(context.Context, *Env) Result {
				h := os.Getenv("HOME")
				var paths []string
				for _, f := range c.files {
					paths = append(paths, h+"/"+f)
				}
				return readAny(c.name+" profile", paths...)
			}})
	}
	for i, c := range clis {
		c := c
		out = append(out, Probe{Group: "G17", ID: fmt.Sprintf("T%02d", i+7), Title: "List " + c.name + " account identity", Goal: GoalDeny, Threat: threat,
			Tool: func(ctx context.Context, _ *Env) Result {
				return program(ctx, "Listing the "+c.name+" identity", c.identity...)
			}})
	}
	return append(out, identityStoreProbes()...)
}

func identityStoreProbes() []Probe {
	const g = "G18"
	threat := "Credential theft or use through local credential stores and agents."
	secret := func(ctx context.Context, _ *Env) Result {
		return program(ctx, "Using the secret service", "secret-tool", "search", "--all", "application", "sandbox-tester")
	}
	return []Probe{
		{Group: g, ID: "T01", Title: "Read local credential store entry", Goal: GoalDeny, Threat: threat, Shell: "secret-tool lookup application sandbox-tester", Tool: secret},
		{Group: g, ID: "T02", Title: "Request credential store lookup", Goal: GoalDeny, Threat: threat, Shell: "secret-tool lookup application sandbox-tester", Tool: secret},
		{Group: g, ID: "T03", Title: "Use SSH agent to sign challenge", Goal: GoalDeny, Threat: threat, Shell: "ssh-add -L",
			Tool: func(context.Context, *Env) Result {
				if s := os.Getenv("SSH_AUTH_SOCK"); s != "" {
					return unixConnect(s)
				}
				return na("No SSH agent is advertised (SSH_AUTH_SOCK is unset).")
			}},
		{Group: g, ID: "T04", Title: "Access GPG/PGP agent", Goal: GoalDeny, Threat: threat, Shell: "gpg-connect-agent /bye",
			Tool: func(context.Context, *Env) Result {
				h := os.Getenv("HOME")
				return socketPresent("GPG agent", h+"/.gnupg/S.gpg-agent", fmt.Sprintf("/run/user/%d/gnupg/S.gpg-agent", os.Getuid()))
			}},
		{Group: g, ID: "T05", Title: "Access OS keychain/wallet", Goal: GoalDeny, Threat: threat, Shell: "secret-tool search --all application sandbox-tester", Tool: secret},
		{Group: g, ID: "T09", Title: "Detect logged-in user sessions", Goal: GoalAny, Threat: "Reconnaissance of host users.", Shell: "who | wc -l",
			Alternates: []Alternate{alt("w", "w -h", "w -h"), alt("users", "users", "users")},
			Tool:       func(context.Context, *Env) Result { return readAny("login record", "/var/run/utmp", "/run/utmp") }},
	}
}
