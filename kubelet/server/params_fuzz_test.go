package server

import (
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// FuzzQueryParams feeds arbitrary query strings to the kubelet server's parsers of /containerLogs
// (parseLogOptions) and /exec, /attach (parseStreamOptions) parameters, which reach it from the API
// server's proxy and from any client holding kubelet credentials. Properties: they never panic; a log
// error names the parameter; accepted log options never start in the future nor carry negative counts;
// accepted stream options have a stream, and exec a command.
func FuzzQueryParams(f *testing.F) {
	for _, s := range []string{"follow=true&tailLines=10&limitBytes=100&timestamps=1", "sinceSeconds=60", "sinceTime=2026-01-01T00:00:00Z",
		"sinceSeconds=9223372036854775807", "sinceSeconds=10&sinceTime=2026-01-01T00:00:00Z", "tailLines=-1", "previous=maybe", "sinceSeconds=0",
		"command=sh&command=-c&input=1&output=1&tty=1&error=1", "stdin=true", "%zz", "limitBytes=99999999999999999999"} {
		f.Add(s)
	}
	params := []string{"follow", "timestamps", "previous", "tailLines", "limitBytes", "sinceSeconds", "sinceTime"}
	f.Fuzz(func(t *testing.T, query string) {
		r := httptest.NewRequest("GET", "/containerLogs/ns/p/c", nil)
		r.URL.RawQuery = query
		before := time.Now()
		opts, _, err := parseLogOptions(r)
		if err != nil {
			param, _, _ := strings.Cut(err.Error(), ":")
			if !strings.Contains(strings.Join(params, " "), param) {
				t.Fatalf("error %q does not name a parameter", err)
			}
		} else {
			if opts.Since.After(time.Now()) {
				t.Fatalf("query %q: logs since %v, after now", query, opts.Since)
			}
			q, _ := url.ParseQuery(query)
			if q.Get("sinceSeconds") != "" && !opts.Since.IsZero() && !opts.Since.Before(before) {
				t.Fatalf("query %q: sinceSeconds gave %v, not before the request", query, opts.Since)
			}
			if (opts.TailLines != nil && *opts.TailLines < 0) || (opts.LimitBytes != nil && *opts.LimitBytes < 0) {
				t.Fatalf("query %q: negative tailLines or limitBytes accepted", query)
			}
		}
		for _, exec := range []bool{true, false} {
			o, err := parseStreamOptions(r, exec)
			if err != nil {
				continue
			}
			if !o.stdin && !o.stdout && !o.stderr {
				t.Fatalf("query %q: stream options without a stream accepted", query)
			}
			if o.tty && o.stderr {
				t.Fatalf("query %q: tty with a separate stderr", query)
			}
			if exec && len(o.command) == 0 {
				t.Fatalf("query %q: exec without a command accepted", query)
			}
		}
	})
}
