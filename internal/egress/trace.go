package egress

import "strings"

// traceID returns the trace-id of a W3C traceparent header
// ("00-<32 hex>-<16 hex>-<2 hex>"), which is the run's correlation id, or
// "" when there is none or it is malformed. Only the first value counts;
// the spec says a request carries one.
func traceID(values []string) string {
	if len(values) == 0 {
		return ""
	}
	parts := strings.Split(strings.TrimSpace(values[0]), "-")
	if len(parts) < 4 || len(parts[0]) != 2 || parts[0] == "ff" || !isHex(parts[0]) {
		return ""
	}
	id := strings.ToLower(parts[1])
	if len(id) != 32 || !isHex(id) || id == strings.Repeat("0", 32) {
		return ""
	}
	if len(parts[2]) != 16 || !isHex(parts[2]) || len(parts[3]) != 2 || !isHex(parts[3]) {
		return ""
	}
	return id
}

func isHex(s string) bool {
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}
