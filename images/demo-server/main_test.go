package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/nodekit/nodekit/images/bundled"
)

func TestSplitWords(t *testing.T) {
	t.Setenv("POD_NAME", "web-1")
	for _, tc := range []struct {
		in      string
		want    []string
		wantErr string
	}{
		{in: "cat /tmp/x", want: []string{"cat", "/tmp/x"}},
		{in: `echo 'a  b' "c $POD_NAME" ${POD_NAME}-x`, want: []string{"echo", "a  b", "c web-1", "web-1-x"}},
		{in: `echo '$POD_NAME'`, want: []string{"echo", "$POD_NAME"}},
		{in: "  exec sleep 1  ", want: []string{"exec", "sleep", "1"}},
		{in: "cat /x | grep y", wantErr: `unsupported shell syntax "|"`},
		{in: "touch a && rm b", wantErr: `unsupported shell syntax "&"`},
		{in: "echo hi > /tmp/f", wantErr: `unsupported shell syntax ">"`},
		{in: "echo 'open", wantErr: "unterminated single quote"},
	} {
		got, err := splitWords(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("splitWords(%q) = %q, %v; want error %q", tc.in, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("splitWords(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestToolboxDispatch(t *testing.T) {
	for _, name := range bundled.Toolbox {
		if _, ok := toolboxCommand([]string{"/bin/" + name}); !ok {
			t.Errorf("toolbox lacks %s", name)
		}
	}
	if len(tools) != len(bundled.Toolbox) {
		t.Errorf("toolbox implements %d commands, bundled.Toolbox lists %d", len(tools), len(bundled.Toolbox))
	}
	if _, ok := toolboxCommand([]string{"/demo-server"}); ok {
		t.Error("demo-server dispatched as a tool")
	}
	dir := t.TempDir()
	f := filepath.Join(dir, "a")
	if touch([]string{f}) != 0 || sh([]string{"-c", "rm " + f}) != 0 {
		t.Fatal("touch/rm failed")
	}
	if _, err := os.Stat(f); !os.IsNotExist(err) {
		t.Errorf("rm via sh -c left %s", f)
	}
	if rm([]string{f}) != 1 || rm([]string{"-f", f}) != 0 {
		t.Error("rm of a missing file: want 1 without -f, 0 with -f")
	}
	if tools["false"](nil) != 1 || tools["true"](nil) != 0 || sh([]string{"-c", "false"}) != 1 {
		t.Error("true/false exit codes")
	}
	if sh([]string{"-c", "cat a | cat"}) != 2 || sh([]string{"-c", "no-such-command-xyz"}) != 127 {
		t.Error("sh: want 2 for unsupported syntax and 127 for a missing command")
	}
	if !busyLoop("while :; do :; done") || !busyLoop(" while true;  do :; done ") || busyLoop("while :; do sleep 1; done") {
		t.Error("busyLoop: only the busy loop forms")
	}
	if sh([]string{"-c", "while :; do sleep 1; done"}) != 2 {
		t.Error("sh: another loop is unsupported syntax")
	}
}

// TestHealthFlips checks the HTTP and file triggers of /healthz and /readyz.
func TestHealthFlips(t *testing.T) {
	t.Setenv("POD_NAME", "web-1")
	t.Setenv("POD_NAMESPACE", "ns1")
	t.Setenv("POD_IP", "10.0.0.5")
	dir := t.TempDir()
	s := &server{opts: options{version: "v7", controlDir: dir}}
	s.healthy.Store(true)
	s.ready.Store(true)
	s.started.Store(true)
	srv := httptest.NewServer(s.handler())
	defer srv.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		buf := make([]byte, 4096)
		n, _ := resp.Body.Read(buf)
		return resp.StatusCode, string(buf[:n])
	}
	post := func(path string) int {
		resp, err := http.Post(srv.URL+path, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	host, _ := os.Hostname()
	if code, body := get("/"); code != 200 || body != "demo-server v7 pod=web-1 namespace=ns1 ip=10.0.0.5 host="+host+"\n" {
		t.Errorf("GET / = %d %q", code, body)
	}
	if code, body := get("/json"); code != 200 || !strings.Contains(body, `"pod": "web-1"`) || !strings.Contains(body, `"POD_IP": "10.0.0.5"`) {
		t.Errorf("GET /json = %d %q", code, body)
	}
	for _, check := range []string{"healthz", "readyz"} {
		if code, _ := get("/" + check); code != 200 {
			t.Errorf("%s initially %d", check, code)
		}
		if post("/control/"+check+"?ok=false") != 200 {
			t.Errorf("flip %s failed", check)
		}
		if code, _ := get("/" + check); code != 503 {
			t.Errorf("%s after ok=false: %d, want 503", check, code)
		}
		post("/control/" + check + "?ok=true")
		if code, _ := get("/" + check); code != 200 {
			t.Errorf("%s after ok=true: %d", check, code)
		}
		os.WriteFile(filepath.Join(dir, check+"-fail"), nil, 0o644)
		if code, _ := get("/" + check); code != 503 {
			t.Errorf("%s with %s-fail file: %d, want 503", check, check, code)
		}
		os.Remove(filepath.Join(dir, check+"-fail"))
	}
	if post("/control/healthz?ok=maybe") != 400 || post("/control/other?ok=true") != 404 {
		t.Error("bad control requests not rejected")
	}
	s.stopping.Store(true)
	if code, _ := get("/readyz"); code != 503 {
		t.Errorf("readyz while terminating: %d, want 503", code)
	}
}
