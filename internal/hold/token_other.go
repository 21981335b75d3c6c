//go:build !unix

package hold

import "errors"

// readToken: a held role runs only in a Linux container; elsewhere no
// release file is taken.
func readToken(string) ([]byte, error) {
	return nil, errors.New("a held role runs only on Linux")
}
