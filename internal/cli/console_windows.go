//go:build windows

package cli

import (
	"os"

	"golang.org/x/sys/windows"
)

// colourConsole reports whether f, a character device, is a console that
// interprets ANSI colour sequences: it turns the console's virtual
// terminal processing on (Windows 10 and later; an older console, or a
// handle that is not a console, refuses and gets plain text).
func colourConsole(f *os.File) bool {
	h := windows.Handle(f.Fd())
	var mode uint32
	if err := windows.GetConsoleMode(h, &mode); err != nil {
		return false
	}
	if mode&windows.ENABLE_VIRTUAL_TERMINAL_PROCESSING != 0 {
		return true
	}
	return windows.SetConsoleMode(h, mode|windows.ENABLE_VIRTUAL_TERMINAL_PROCESSING) == nil
}
