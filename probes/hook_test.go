package probes

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestHTTPHook: a hook's path keeps its query, the pod IP is the default host, a named port resolves,
// any answered status is success (as upstream), HTTPS answered in plain HTTP falls back to HTTP without
// the Authorization header, and a refused connection or unknown port name is an error.
func TestHTTPHook(t *testing.T) {
	got := make(chan string, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.URL.RequestURI() + " " + r.UserAgent() + " auth=" + r.Header.Get("Authorization")
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer srv.Close()
	host, port := hostPort(t, srv.Listener.Addr().String())
	c := &v1.Container{Ports: []v1.ContainerPort{{Name: "web", ContainerPort: int32(port)}}}
	agent := "kube-lifecycle/" + strings.TrimPrefix(UserAgent(), "kube-probe/")
	ctx := context.Background()

	h := &v1.HTTPGetAction{Path: "/dial?host=10.0.0.5&port=8080&request=echo%3Fmsg%3Dpoststart", Port: intstr.FromString("web")}
	if err := HTTPHook(ctx, h, c, host); err != nil {
		t.Fatalf("hook answered 500: %v, want no error (upstream checks no status)", err)
	}
	if r := <-got; r != "/dial?host=10.0.0.5&port=8080&request=echo%3Fmsg%3Dpoststart "+agent+" auth=" {
		t.Errorf("request %q", r)
	}

	h = &v1.HTTPGetAction{Scheme: v1.URISchemeHTTPS, Host: host, Path: "/tls", Port: intstr.FromInt(port),
		HTTPHeaders: []v1.HTTPHeader{{Name: "Authorization", Value: "Bearer x"}}}
	if err := HTTPHook(ctx, h, nil, ""); err != nil {
		t.Fatalf("HTTPS hook to a plain HTTP server: %v, want the HTTP fallback to succeed", err)
	}
	if r := <-got; r != "/tls "+agent+" auth=" {
		t.Errorf("fallback request %q, want /tls without Authorization", r)
	}

	var uerr *url.Error
	if err := HTTPHook(ctx, &v1.HTTPGetAction{Host: "127.0.0.1", Port: intstr.FromInt(refusedPort(t))}, nil, ""); !errors.As(err, &uerr) {
		t.Errorf("refused connection: %v, want a *url.Error", err)
	}
	if err := HTTPHook(ctx, &v1.HTTPGetAction{Port: intstr.FromString("nope")}, c, host); err == nil || !strings.Contains(err.Error(), "port not found") {
		t.Errorf("unknown port name: %v", err)
	}
	if err := HTTPHook(ctx, &v1.HTTPGetAction{Port: intstr.FromInt(port)}, c, ""); err == nil {
		t.Error("no host and no pod IP: no error")
	}
}
