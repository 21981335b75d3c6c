//go:build !unix

package egress

import "net"

// The gateway runs only in the sandbox's Linux containers; off Unix this
// package serves the host its record types, and these are the plain
// forms.

// rawReader reads c into a pooled buffer.
func rawReader(c net.Conn) func() (*[]byte, int, error) {
	return func() (*[]byte, int, error) {
		bp := copyBufs.Get().(*[]byte)
		nr, err := c.Read(*bp)
		return bp, nr, err
	}
}
