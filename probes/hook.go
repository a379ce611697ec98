package probes

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// hookClient sends the httpGet actions of lifecycle hooks: the probes' client (no proxy, no certificate
// verification, no keep-alives, same-host redirects only), as upstream's insecure lifecycle client.
var hookClient = newHTTPClient()

// HTTPHook runs a lifecycle hook's httpGet action (postStart, preStop) for container c as upstream's
// kubelet does (pkg/kubelet/lifecycle): GET <scheme>://<host>:<port><path>, where host is the action's
// host or else podIP, the port a number or the name of one of c's ports, and the path may carry a
// query ("/dial?host=10.0.0.5&port=8080"); the action's headers are sent, User-Agent defaults to
// kube-lifecycle/<major>.<minor> and Accept to */*. An HTTPS request answered in plain HTTP is retried
// once over HTTP without its Authorization header. Whatever status the server answers, the hook ran:
// upstream fails a hook only when the request could not be made or completed (bad port, no host,
// refused, timeout — ctx bounds it), and so does HTTPHook; the error (a *url.Error for a failed
// request) says which.
func HTTPHook(ctx context.Context, h *v1.HTTPGetAction, c *v1.Container, podIP string) error {
	host := hostOr(h.Host, podIP)
	if host == "" {
		return errors.New("httpGet hook: the pod has no IP")
	}
	port, err := ResolvePort(h.Port, c)
	if err != nil {
		return err
	}
	req, err := newRequest(ctx, h, host, port, userAgent("lifecycle"))
	if err != nil {
		return err
	}
	err = doDiscard(req)
	var uerr *url.Error
	if errors.As(err, &uerr) && strings.Contains(uerr.Err.Error(), "server gave HTTP response to HTTPS client") {
		retry := req.Clone(ctx)
		retry.URL.Scheme = "http"
		retry.Header.Del("Authorization")
		if herr := doDiscard(retry); herr == nil {
			return nil
		}
	}
	return err
}

// doDiscard sends req with hookClient and drains a bounded part of the response body.
func doDiscard(req *http.Request) error {
	resp, err := hookClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxBodyBytes))
	return nil
}
