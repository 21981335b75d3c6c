package enginever

import "testing"

func TestMajor(t *testing.T) {
	for _, tt := range []struct {
		v    string
		want int
		ok   bool
	}{{"27.3.1", 27, true}, {"20.10.24+dfsg1", 20, true}, {"26", 26, true}, {"", 0, false}, {"twenty", 0, false}, {"-1.0", 0, false}} {
		got, err := Major(tt.v)
		if got != tt.want || (err == nil) != tt.ok {
			t.Errorf("Major(%q) = %d, %v; want %d, ok %v", tt.v, got, err, tt.want, tt.ok)
		}
	}
	if !Before("20.10.24", RouteFixed) || Before("25.0.0", RouteFixed) || Before("garbled", Min) || !Before("25.0.5", Min) {
		t.Error("Before disagrees with Major")
	}
}
