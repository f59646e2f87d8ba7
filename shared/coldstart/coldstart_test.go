package coldstart

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestInitErrorCarriesItsMessageAsItIs: the report to the Runtime API
// quotes the configuration problem as it is, not HTML-escaped.
func TestInitErrorCarriesItsMessageAsItIs(t *testing.T) {
	t.Parallel()
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- r.URL.Path + " " + string(b)
	}))
	defer srv.Close()
	const msg = `config: REMOTE_BASE_URL "<none>" & more`
	if err := reportInitError(strings.TrimPrefix(srv.URL, "http://"), msg); err != nil {
		t.Fatal(err)
	}
	want := `/2018-06-01/runtime/init/error {"errorMessage":"config: REMOTE_BASE_URL \"<none>\" & more","errorType":"` + InitErrorType + `"}`
	if g := <-got; g != want {
		t.Errorf("posted %s\nwant   %s", g, want)
	}
}
