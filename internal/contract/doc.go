// Package contract holds no code: its tests keep one home for each
// contract between the host and the containers. A run-directory file name
// is declared in internal/runs and an environment variable's name in the
// one package that owns it; the tests fail when a name is spelled as a
// string literal anywhere else, beyond the places still listed (a ratchet:
// the lists may only shrink).
package contract
