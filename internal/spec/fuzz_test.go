package spec

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzLoadResolve: any input either loads and then resolves and renders
// without error, or fails with a non-empty *Problems. Never a panic.
func FuzzLoadResolve(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*/*.toml")
	for _, s := range seeds {
		data, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Load("fuzz.toml", data)
		if err != nil {
			var probs *Problems
			if !errors.As(err, &probs) || len(probs.List) == 0 {
				t.Fatalf("error is not a non-empty *Problems: %v", err)
			}
			return
		}
		p, err := Resolve(s)
		if err != nil {
			t.Fatalf("valid spec did not resolve: %v", err)
		}
		if _, err := Artifacts(p); err != nil {
			t.Fatalf("rendering artifacts: %v", err)
		}
	})
}

func BenchmarkLoadResolveDefault(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		s, err := Default()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Resolve(s); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLoadValidate(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Default(); err != nil {
			b.Fatal(err)
		}
	}
}
