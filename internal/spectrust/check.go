package spectrust

import (
	"slices"

	"github.com/mcpsidecar/mcpsidecar/internal/spec"
)

// Status is what the store says about one spec file's content.
type Status int

const (
	// Unknown: no entry for the file's path.
	Unknown Status = iota
	// Trusted: the entry's hash is the content's.
	Trusted
	// Changed: the path was trusted with other content; trust is for
	// exact content, so it must be trusted again.
	Changed
)

// Check is the store's answer for one spec file.
type Check struct {
	Status Status
	// Hash is the content's (see [Hash]).
	Hash string
	// Previous is the entry trusted before (Changed only).
	Previous Entry
	// Added are the softenings the trusted content did not have (Changed
	// only; none when the change added no softening).
	Added []spec.Softening
}

// Decide is the answer for content with hash and softenings, given the
// entry for its path (found says whether there is one).
func Decide(prev Entry, found bool, hash string, softenings []spec.Softening) Check {
	c := Check{Hash: hash}
	switch {
	case !found:
		c.Status = Unknown
	case prev.SHA256 == hash:
		c.Status = Trusted
	default:
		c.Status, c.Previous = Changed, prev
		for _, e := range softenings {
			if !slices.Contains(prev.Softenings, e) {
				c.Added = append(c.Added, e)
			}
		}
	}
	return c
}

// Check looks up the spec file at the absolute path with content data.
func (s Store) Check(path string, data []byte, softenings []spec.Softening) (Check, error) {
	prev, found, err := s.Lookup(path)
	if err != nil {
		return Check{}, err
	}
	return Decide(prev, found, Hash(data), softenings), nil
}
