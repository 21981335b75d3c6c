package contract

// runFileLiteralsLeft are the places (package, name) that still spell a
// run-directory file name instead of importing it from internal/runs.
// "config.json" and "Dockerfile" in internal/dockerx are the Docker CLI's
// config and the build context's file, not run files.
var runFileLiteralsLeft = []string{
	"internal/dockerx Dockerfile",
	"internal/dockerx config.json",
}

// envLiteralsLeft are the places (package, name) that still spell a
// variable another package also spells: one of them should own it. None
// is left; a new one fails the test.
var envLiteralsLeft = []string{}
