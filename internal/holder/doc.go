// Package holder is the output holder's side of reading a run's record
// through an engine's API, shared by the Docker backend (engine volumes,
// docker exec) and the Kubernetes backend (pod volumes, pods/exec): the
// holder's commands and their command lines, and [WriteOutput], the safe
// reader that writes the named regular files of an output directory as a
// tar (a link, a FIFO, a file over the cap is left out and said). It runs
// inside a container: it imports no host package (internal/contract).
package holder
