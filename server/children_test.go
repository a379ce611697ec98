package server

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestWaitAPIReady: a component waits while /readyz (without the components' own checks) answers
// forbidden or not ready, starts once it answers ok, logging the wait; an API server that never gets
// ready makes it start anyway after the bound, with a warning.
func TestWaitAPIReady(t *testing.T) {
	var calls atomic.Int32
	var query atomic.Value
	ready := atomic.Bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		query.Store(r.URL.RawQuery)
		switch {
		case r.URL.Path != "/readyz":
			http.NotFound(w, r)
		case calls.Load() == 1: // before the bootstrap roles exist, even /readyz may be forbidden
			http.Error(w, `forbidden: User "system:kube-scheduler" cannot get path "/readyz"`, http.StatusForbidden)
		case !ready.Load():
			http.Error(w, "[-]poststarthook/rbac/bootstrap-roles failed: not finished", http.StatusInternalServerError)
		default:
			_, _ = w.Write([]byte("ok"))
		}
	}))
	defer srv.Close()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	body := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: " + srv.URL +
		"\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user: {}\n"
	if err := os.WriteFile(kubeconfig, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))

	// Never ready: false after the bound, and a warning.
	start := time.Now()
	if waitAPIReady(context.Background(), kubeconfig, log, time.Second) {
		t.Fatal("ready without an ok /readyz")
	}
	if took := time.Since(start); took < time.Second || took > 10*time.Second {
		t.Errorf("the wait took %v, bound 1s", took)
	}
	if !strings.Contains(logs.String(), `level=WARN msg="API server not ready; starting anyway`) {
		t.Errorf("no warning:\n%s", logs.String())
	}
	if q, _ := query.Load().(string); !strings.HasPrefix(q, "exclude=scheduler&exclude=controller-manager") {
		t.Errorf("readyz query %q, want the components' own checks excluded", q)
	}

	// Ready after a few polls.
	logs.Reset()
	n := calls.Load()
	go func() {
		for calls.Load() < n+3 {
			time.Sleep(10 * time.Millisecond)
		}
		ready.Store(true)
	}()
	if !waitAPIReady(context.Background(), kubeconfig, log, time.Minute) {
		t.Fatalf("not ready:\n%s", logs.String())
	}
	for _, want := range []string{`msg="waiting for the API server to be ready before starting"`, `msg="API server ready; starting" waited=`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %s:\n%s", want, logs.String())
		}
	}

	// A context ending stops the wait without a warning.
	logs.Reset()
	ready.Store(false)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if waitAPIReady(ctx, kubeconfig, log, time.Minute) || strings.Contains(logs.String(), "WARN") {
		t.Errorf("a cancelled wait reported ready or warned:\n%s", logs.String())
	}
}
