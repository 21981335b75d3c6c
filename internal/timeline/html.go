package timeline

import "io"

// WriteHTML writes report.html.
func (t *Timeline) WriteHTML(w io.Writer) error { return nil }
