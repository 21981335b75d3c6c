// Package contract holds no code: its tests keep one home for each
// contract between the host and the containers, and check that both
// sides of each contract still agree.
//
// A run-directory file name is declared in internal/runs and an
// environment variable's name in the one package that owns it; the
// ratchet tests fail when a name is spelled as a string literal anywhere
// else, beyond the places still listed (the lists may only shrink). The
// producer/consumer tests write a run directory with each producer's own
// writer and read it back with every consumer (the verdict, the timeline,
// `runs show`, `report show`), and fill each role's environment as the
// host does and read it with the role's own reader. The import rules keep
// the roles free of the host's Docker machinery.
package contract
