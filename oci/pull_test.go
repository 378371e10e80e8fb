package oci

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
)

// TestFetchAllParallel downloads layers in parallel from a registry that
// wants a bearer token (run with -race: the token is shared), each blob
// once though the manifest lists one twice.
func TestFetchAllParallel(t *testing.T) {
	blobs := map[string][]byte{}
	var ls []descriptor
	for i := 0; i < 5; i++ {
		b := []byte(strings.Repeat(fmt.Sprint(i), 100000+i))
		blobs[sum(b)] = b
		ls = append(ls, descriptor{Digest: sum(b), Size: int64(len(b))})
	}
	ls = append(ls, ls[0])
	var tokens, gets atomic.Int32
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/token" {
			tokens.Add(1)
			fmt.Fprint(w, `{"token":"t"}`)
			return
		}
		if r.Header.Get("Authorization") != "Bearer t" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="`+srv.URL+`/token",service="s"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		d := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
		b, ok := blobs[d]
		if !ok {
			http.NotFound(w, r)
			return
		}
		gets.Add(1)
		w.Write(b)
	}))
	defer srv.Close()
	ref, err := ParseRef(strings.TrimPrefix(srv.URL, "http://") + "/r:t")
	if err != nil {
		t.Fatal(err)
	}
	cc := cache{t.TempDir()}
	os.MkdirAll(cc.dir+"/blobs/sha256", 0o755)
	c, err := newClient(ref, "")
	if err != nil {
		t.Fatal(err)
	}
	c.scheme = "http"
	c.creds = func() (credentials, bool) { return credentials{}, false }
	if err := cc.fetchAll(c, ls, PullOptions{}); err != nil {
		t.Fatal(err)
	}
	for d, b := range blobs {
		if got, err := os.ReadFile(cc.blob(d)); err != nil || string(got) != string(b) {
			t.Errorf("%s: %v", d, err)
		}
	}
	if gets.Load() != 5 || tokens.Load() < 1 {
		t.Errorf("%d blob GETs (want 5: one per blob), %d tokens", gets.Load(), tokens.Load())
	}
}
