// Package runs owns run directories: it creates a unique directory per run
// under <base>/runs/, creates the per-role output directories the containers
// write into, writes the host's artifacts, copies the workload's files out of
// those output directories, and reads past runs back for `mcpsidecar runs`.
//
// Threat: a workload that controls its output directory can plant symbolic
// links or special files there to make the host overwrite or read something
// outside the run. Every host-side write therefore goes through an [os.Root]
// with O_CREATE|O_EXCL (never replacing or following what is there), and
// every copy out of an output directory opens the source with O_NOFOLLOW and
// accepts only a regular file of bounded size. This package must not talk to
// Docker or read the environment.
package runs
