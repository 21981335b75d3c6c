package testutil

import (
	"reflect"
	"slices"
	"testing"
	"time"
)

type wireInner struct {
	A string `json:"a"`
	B int    `json:"b,omitempty"`
}

type wireEmbedded struct {
	E string `json:"e"`
}

type wireProducer struct {
	wireEmbedded
	Time  string      `json:"time"`
	Items []wireInner `json:"items"`
	One   *wireInner  `json:"one"`
	Skip  string      `json:"-"`
	Plain string
}

type wireConsumerOK struct {
	E     string            `json:"e"`
	Time  time.Time         `json:"time"` // a leaf: the name is enough
	Items []struct{ A int } `json:"items"`
	One   wireInner         `json:"one"`
	Plain string            `json:"plain"` // case-insensitive, as encoding/json
}

type wireConsumerBad struct {
	Gone  string `json:"gone"`
	Skip  string `json:"skip"`
	Items []struct {
		C string `json:"c"`
	} `json:"items"`
	One map[string]struct {
		D string `json:"d"`
	} `json:"one"`
}

func TestUncovered(t *testing.T) {
	if got := uncovered(typeOf[wireConsumerOK](), typeOf[wireProducer](), ""); len(got) != 0 {
		t.Errorf("covered consumer: got %q, want none", got)
	}
	want := []string{"gone", "items.c", "one.d", "skip"}
	got := uncovered(typeOf[wireConsumerBad](), typeOf[wireProducer](), "")
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func typeOf[T any]() reflect.Type { return reflect.TypeFor[T]() }

func TestWireFieldsCoveredUnwritten(t *testing.T) {
	WireFieldsCovered(t, "x", wireConsumerBad{}, wireProducer{}, "gone", "items.c", "one.d", "skip")
}
