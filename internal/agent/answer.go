package agent

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/mcpsidecar/mcpsidecar/internal/runs"
)

// AnswerFile is the name of the saved answer in the output directory.
const AnswerFile = runs.FileAnswer

// saveAnswer writes text to dir/answer.txt atomically: a new temporary file
// in the same directory (O_EXCL|O_NOFOLLOW, so a planted link is never
// followed), synced, then renamed over the final name (rename replaces a
// planted link instead of writing through it). All of it goes through an
// os.Root, so nothing can resolve outside dir.
func saveAnswer(dir, text string, maxBytes int) error {
	if err := checkAnswer(text, maxBytes); err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("opening output directory: %w", err)
	}
	defer root.Close()
	tmp := fmt.Sprintf(".%s.%d.tmp", AnswerFile, os.Getpid())
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|runs.NoFollow, 0o644)
	if err != nil {
		return fmt.Errorf("creating temporary answer file: %w", err)
	}
	if err := writeSync(f, text); err != nil {
		root.Remove(tmp)
		return err
	}
	if err := root.Rename(tmp, AnswerFile); err != nil {
		root.Remove(tmp)
		return fmt.Errorf("renaming answer into place: %w", err)
	}
	return nil
}

// checkAnswer refuses empty, oversized and non-UTF-8 answers.
func checkAnswer(text string, maxBytes int) error {
	switch {
	case strings.TrimSpace(text) == "":
		return errors.New("answer is empty")
	case len(text) > maxBytes:
		return fmt.Errorf("answer is %d bytes, over the %d-byte cap", len(text), maxBytes)
	case !utf8.ValidString(text):
		return errors.New("answer is not valid UTF-8")
	}
	return nil
}

func writeSync(f *os.File, text string) error {
	_, err := f.WriteString(text)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing answer: %w", err)
	}
	return nil
}
