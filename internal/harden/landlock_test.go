//go:build linux

package harden

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/landlock-lsm/go-landlock/landlock"
)

func TestPlanLandlock(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "absent")
	l := Landlock{
		ReadOnlyDirs:  []string{dir, missing},
		ReadWriteDirs: []string{dir},
		ConnectTCP:    []uint16{3128},
		BindTCP:       []uint16{8000},
	}
	tests := []struct {
		abi       int
		net       bool
		wantFS    landlock.AccessFSSet
		wantNet   landlock.AccessNetSet
		wantRules int
	}{
		{1, false, landlock.V1.HandledAccessFS, 0, 3},
		{3, false, landlock.V3.HandledAccessFS, 0, 3},
		{4, true, landlock.V4.HandledAccessFS, accessTCP, 5},
		{7, true, landlock.V7.HandledAccessFS, accessTCP, 5},
		{99, true, landlock.V11.HandledAccessFS, accessTCP, 5}, // a newer kernel: go-landlock's newest ABI
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("ABI %d", tt.abi), func(t *testing.T) {
			plan := planLandlock(l, tt.abi, tt.net)
			if plan.cfg.HandledAccessFS != tt.wantFS || plan.cfg.HandledAccessNet != tt.wantNet {
				t.Errorf("got config %v, want fs %v net %v", plan.cfg, tt.wantFS, tt.wantNet)
			}
			if len(plan.rules) != tt.wantRules {
				t.Errorf("got %d rules %v, want %d", len(plan.rules), plan.rules, tt.wantRules)
			}
			if diff := cmp.Diff([]string{missing}, plan.missing); diff != "" {
				t.Errorf("missing paths mismatch (-want +got):\n%s", diff)
			}
			all := fmt.Sprint(plan.rules)
			if !strings.Contains(all, devNull) {
				t.Errorf("rules %s do not grant %s", all, devNull)
			}
			for _, r := range plan.rules {
				s := fmt.Sprint(r)
				if strings.Contains(s, dir) && strings.Contains(s, "execute") {
					t.Errorf("a writable or read-only dir got execute: %s", s)
				}
				if strings.Contains(s, "make_sym") || strings.Contains(s, "refer") {
					t.Errorf("rule grants symlink creation or refer: %s", s)
				}
			}
		})
	}
}

func TestFSABI(t *testing.T) {
	for minABI, want := range map[int]int{0: 1, 1: 1, 3: 3, 4: 3, 5: 5, 7: 6, 8: 6, 9: 9, 11: 9} {
		if got := fsABI(minABI); got != want {
			t.Errorf("fsABI(%d): got %d, want %d", minABI, got, want)
		}
	}
}
