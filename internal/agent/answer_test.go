package agent

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestSaveAnswer(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		wantErr string
	}{
		{"ok", "Use IHttpClientFactory.\n", ""},
		{"empty", "  \n", "answer is empty"},
		{"oversized", strings.Repeat("x", 101), "101 bytes, over the 100-byte cap"},
		{"not utf-8", "\xff\xfe", "not valid UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			err := saveAnswer(dir, tt.text, 100)
			got, rerr := os.ReadFile(filepath.Join(dir, AnswerFile))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("saveAnswer error = %v, want %q", err, tt.wantErr)
				}
				if rerr == nil {
					t.Errorf("answer.txt written despite the error")
				}
				return
			}
			if err != nil || string(got) != tt.text {
				t.Fatalf("saveAnswer: err %v, file %q, want %q", err, got, tt.text)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 1 {
				t.Errorf("output dir holds %d entries, want only answer.txt (no temp left)", len(entries))
			}
		})
	}
}

// A link planted at answer.txt is replaced, not written through.
func TestSaveAnswerPlantedLink(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(outside, []byte("original"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, AnswerFile)); err != nil {
		t.Fatal(err)
	}
	if err := saveAnswer(dir, "answer", 100); err != nil {
		t.Fatalf("saveAnswer: %v", err)
	}
	if b, _ := os.ReadFile(outside); string(b) != "original" {
		t.Errorf("link target changed to %q", b)
	}
	fi, err := os.Lstat(filepath.Join(dir, AnswerFile))
	if err != nil || !fi.Mode().IsRegular() {
		t.Errorf("answer.txt is %v (err %v), want a regular file", fi.Mode(), err)
	}
}

// A link planted at the temporary name makes the save fail, not follow it.
func TestSaveAnswerPlantedTempLink(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "victim")
	os.WriteFile(outside, []byte("original"), 0o644)
	tmp := filepath.Join(dir, "."+AnswerFile+"."+itoa(os.Getpid())+".tmp")
	if err := os.Symlink(outside, tmp); err != nil {
		t.Fatal(err)
	}
	if err := saveAnswer(dir, "answer", 100); err == nil {
		t.Fatal("saveAnswer succeeded through a planted temp link")
	}
	if b, _ := os.ReadFile(outside); string(b) != "original" {
		t.Errorf("link target changed to %q", b)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
