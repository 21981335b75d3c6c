//go:build linux

package roles

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// run runs the command line args through [Run].
func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Run(context.Background(), args, Streams{In: strings.NewReader(""), Out: &out, Err: &errb})
	return code, out.String(), errb.String()
}
