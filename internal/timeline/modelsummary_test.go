package timeline

import "testing"

// A failed model request reads as failed, with its error, not "answered"
// (issue 13).
func TestModelSummary(t *testing.T) {
	yes, no := true, false
	tests := []struct {
		l    turnLine
		want string
	}{
		{turnLine{Turn: 1, Model: "m", OK: &yes}, "turn 1: model m answered"},
		{turnLine{Turn: 2, Model: "m", OK: &yes, ToolsRequested: []string{"a", "b"}}, "turn 2: model m asked for a, b"},
		{turnLine{Turn: 1, Model: "m", OK: &no, Error: "model API at h answered 401 Unauthorized: bad key"}, "turn 1: model m request failed: model API at h answered 401 Unauthorized: bad key"},
		{turnLine{Turn: 1, Model: "m", Error: "x"}, "turn 1: model m request failed: x"},
	}
	for _, tt := range tests {
		if got := modelSummary(tt.l); got != tt.want {
			t.Errorf("modelSummary(%+v) = %q, want %q", tt.l, got, tt.want)
		}
	}
}
