//go:build !windows

package cli

import "os"

// colourConsole: every Unix terminal takes ANSI colours.
func colourConsole(*os.File) bool { return true }
