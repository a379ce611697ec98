package logging

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"k8s.io/klog/v2"
)

func TestKlogThroughInstalledHandler(t *testing.T) {
	var buf bytes.Buffer
	h, err := NewHandler(&buf, "info", true)
	if err != nil {
		t.Fatal(err)
	}
	Install(h)
	t.Cleanup(klog.ClearLogger)

	klog.ErrorS(errors.New("etcd unreachable"), "storage backend failed", "resource", "pods", "attempt", 3)
	klog.InfoS("cache synced", "resource", "nodes")
	klog.V(2).InfoS("chatty detail") // below klog's verbosity 0: never emitted
	klog.Errorf("watch of %s ended", "services")
	klog.Flush()

	var recs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("not a JSON record: %q: %v", line, err)
		}
		recs = append(recs, r)
	}
	if len(recs) != 3 {
		t.Fatalf("got %d records, want 3:\n%s", len(recs), buf.String())
	}
	want := []map[string]any{
		{"level": "ERROR", "msg": "storage backend failed", "err": "etcd unreachable", "resource": "pods", "attempt": float64(3)},
		{"level": "INFO", "msg": "cache synced", "resource": "nodes"},
		{"level": "ERROR", "msg": "watch of services ended"},
	}
	for i, w := range want {
		for k, v := range w {
			if got := recs[i][k]; got != v {
				t.Errorf("record %d: %s = %v, want %v (record %v)", i, k, got, v, recs[i])
			}
		}
	}
}

func TestParseLevel(t *testing.T) {
	for in, ok := range map[string]bool{"debug": true, "INFO": true, "warn": true, "error": true, "verbose": false, "": false} {
		_, err := ParseLevel(in)
		if (err == nil) != ok {
			t.Errorf("ParseLevel(%q) err = %v, want ok=%v", in, err, ok)
		}
		if err != nil && !strings.Contains(err.Error(), "is not one of debug, info, warn, error") {
			t.Errorf("ParseLevel(%q) err = %v: want the accepted levels named", in, err)
		}
	}
}
