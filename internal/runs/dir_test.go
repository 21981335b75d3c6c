package runs

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func newRun(t *testing.T) *Dir {
	t.Helper()
	d, err := Create(t.TempDir(), time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func TestCreateUnique(t *testing.T) {
	base := t.TempDir()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	want := []string{"run-2026-01-02-03-04-05", "run-2026-01-02-03-04-05-2", "run-2026-01-02-03-04-05-3"}
	for i, w := range want {
		d, err := Create(base, now)
		if err != nil {
			t.Fatal(err)
		}
		d.Close()
		if d.ID != w {
			t.Errorf("run %d: got %s, want %s", i, d.ID, w)
		}
	}
}

func TestResolveAndList(t *testing.T) {
	base := t.TempDir()
	for _, s := range []int{1, 2} {
		d, err := Create(base, time.Date(2026, 1, 2, 3, 4, s, 0, time.UTC))
		if err != nil {
			t.Fatal(err)
		}
		must(t, d.WriteJSON(MetadataFile, Metadata{Schema: MetadataSchema, RunID: d.ID}))
		d.Close()
	}
	list, err := List(base)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].ID != "run-2026-01-02-03-04-02" || list[0].Meta == nil || list[0].Meta.RunID != list[0].ID {
		t.Fatalf("List = %+v", list)
	}
	tests := []struct{ ref, want, wantErr string }{
		{"run-2026-01-02-03-04-01", "run-2026-01-02-03-04-01", ""},
		{"run-2026-01-02-03-04-0", "", "ambiguous"},
		{"run-1999", "", "not found"},
		{"../etc", "", "not found"},
	}
	for _, tt := range tests {
		t.Run(tt.ref, func(t *testing.T) {
			got, err := Resolve(base, tt.ref)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || filepath.Base(got) != tt.want {
				t.Fatalf("got %s, %v; want %s", got, err, tt.want)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestLatestAndIDs(t *testing.T) {
	base := t.TempDir()
	if _, err := Latest(base); err == nil || !strings.Contains(err.Error(), "no runs in") {
		t.Fatalf("Latest of an empty dir: %v", err)
	}
	if ids := IDs(filepath.Join(base, "missing")); ids == nil || len(ids) != 0 {
		t.Fatalf("IDs of a missing dir = %#v, want empty", ids)
	}
	for _, s := range []int{1, 3, 2} {
		d, err := Create(base, time.Date(2026, 1, 2, 3, 4, s, 0, time.UTC))
		must(t, err)
		d.Close()
	}
	got, err := Latest(base)
	if err != nil || filepath.Base(got) != "run-2026-01-02-03-04-03" {
		t.Fatalf("Latest = %s, %v", got, err)
	}
	if ids := IDs(base); strings.Join(ids, " ") != "run-2026-01-02-03-04-03 run-2026-01-02-03-04-02 run-2026-01-02-03-04-01" {
		t.Fatalf("IDs = %v", ids)
	}
}

func TestUsageStopsAtTheCap(t *testing.T) {
	d := newRun(t)
	out := filepath.Join(d.Path, "agent")
	mustDo(t, os.Mkdir(out, 0o700))
	for i := range 20 {
		mustDo(t, os.WriteFile(filepath.Join(out, strconv.Itoa(i)), make([]byte, 8192), 0o644))
	}
	b, n, err := d.Usage("agent")
	if err != nil || n != 21 || b < 20*8192 {
		t.Errorf("Usage = %d bytes, %d entries, %v; want 21 entries, >= %d bytes", b, n, err, 20*8192)
	}
	if _, n, _ := d.Usage("missing"); n != 0 {
		t.Errorf("a missing directory counted %d entries", n)
	}
}

// TestCreatePrivate: a run directory, and a runs directory Create makes,
// are the user's alone.
func TestCreatePrivate(t *testing.T) {
	runsDir := filepath.Join(t.TempDir(), "runs")
	d, err := Create(runsDir, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, p := range []string{runsDir, d.Path} {
		st, err := os.Stat(p)
		if err != nil || st.Mode().Perm() != 0o700 {
			t.Errorf("%s: mode %v (%v), want 0700", p, st.Mode().Perm(), err)
		}
	}
}
