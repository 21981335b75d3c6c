//go:build linux

package egress

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"testing"
)

// FuzzRecorderFraming: on any byte stream, the header blocks the recorder
// cuts are the requests net/http reads, in order. For every request
// net/http parses that the recorder can vouch for (it has framed every
// body before it), the recorder's block has the same request line, the
// same Host headers and the same framing; once it cannot frame a body it
// vouches for nothing more. This is the property that lets a kept-alive
// connection carry several requests, each checked against its own Host.
func FuzzRecorderFraming(f *testing.F) {
	for _, s := range []string{
		"GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\nGET http://b.test/ HTTP/1.1\r\nHost: evil.test\r\n\r\n",
		"POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\nContent-Length: 5\r\n\r\nhelloGET http://b.test/ HTTP/1.1\r\nHost: b.test\r\n\r\n",
		"POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\nContent-Length: 0\r\n\r\n\r\n\r\nGET http://b.test/ HTTP/1.1\r\nHost: b.test\r\n\r\n",
		"POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET http://b.test/ HTTP/1.1\r\nHost: evil\r\n\r\n",
		"GET http://a.test/ HTTP/1.1\nHost: a.test\n\nGET http://b.test/ HTTP/1.1\nHost: b.test\n\n",
		"GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabcGET / HTTP/1.1\r\nHost: x\r\n\r\n",
		"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\nGET http://x.invalid/ HTTP/1.1\r\nHost: other.invalid\r\n\r\n",
		"GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\n X: folded\r\n\r\nGET http://b/ HTTP/1.1\r\nHost: b\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		rc := &recordingConn{limit: 1 << 20}
		// Feed in uneven pieces, as reads arrive.
		for i, n := 0, 1; i < len(data); i, n = i+n, n%7+1 {
			rc.record(data[i:min(len(data), i+n)])
		}
		br := bufio.NewReader(bytes.NewReader(data))
		last := ""
		for i := 0; ; i++ {
			if last == http.MethodPost {
				peek, _ := br.Peek(4)
				br.Discard(numLeadingCRorLFTest(peek))
			}
			r, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			last = r.Method
			wasPoisoned := rc.poisoned
			blk, reason := rc.claim(r)
			if blk == nil {
				if !wasPoisoned {
					// Not a way around the check (the gateway refuses and
					// closes), but the recorder lost track of a request
					// net/http read while it said it could frame: the
					// framing rules differ somewhere.
					t.Fatalf("request %d %q: the recorder lost track: %s", i, r.Method+" "+r.RequestURI, reason)
				}
				return // the recorder vouches for nothing more: the gateway refuses and closes
			}
			if blk.requestLine != r.Method+" "+r.RequestURI+" "+r.Proto {
				t.Fatalf("request %d: block %q, net/http read %q", i, blk.requestLine, r.Method+" "+r.RequestURI+" "+r.Proto)
			}
			if rc.poisoned {
				return // this request is its own; no later one is served
			}
			if _, err := io.Copy(io.Discard, r.Body); err != nil {
				return
			}
		}
	})
}

func numLeadingCRorLFTest(v []byte) (n int) {
	for _, b := range v {
		if b != '\r' && b != '\n' {
			break
		}
		n++
	}
	return n
}
