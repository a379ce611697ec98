package probes

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
)

// maxBodyBytes bounds how much of a probe's response body is read (upstream reads at most 10 KiB).
const maxBodyBytes = 10 << 10

// maxRedirects is how many same-host redirects an HTTP probe follows (net/http's default limit).
const maxRedirects = 10

// newHTTPClient is the client of every HTTP(S) probe: no proxy, no certificate verification (probes
// check liveness, not identity), no keep-alives, the lingering probe dialer, and upstream's redirect
// rule (checkRedirect).
func newHTTPClient() *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy:              nil, // never through HTTP_PROXY: the pod is local
			DialContext:        dialer().DialContext,
			TLSClientConfig:    &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // probes do not verify certificates, as upstream
			DisableKeepAlives:  true,
			DisableCompression: true,
		},
		CheckRedirect: checkRedirect,
	}
}

// checkRedirect follows redirects to the same host (up to maxRedirects) and stops at a redirect to
// another host, whose 3xx response is then returned as is: kubelet probes never leave the target host.
func checkRedirect(req *http.Request, via []*http.Request) error {
	if req.URL.Hostname() != via[0].URL.Hostname() {
		return http.ErrUseLastResponse
	}
	if len(via) >= maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	return nil
}

// probeURL builds <scheme>://<host>:<port><path> as upstream does: the path may carry a query.
func probeURL(scheme v1.URIScheme, host string, port int, path string) *url.URL {
	u, err := url.Parse(path)
	if err != nil || u.Host != "" || u.Scheme != "" {
		u = &url.URL{Path: path}
	}
	u.Scheme = strings.ToLower(string(scheme))
	if u.Scheme == "" {
		u.Scheme = "http"
	}
	u.Host = net.JoinHostPort(host, strconv.Itoa(port))
	return u
}

// newRequest is the GET of an httpGet action against host:port (probeURL) with the action's headers: a
// "Host" header sets the request's host; User-Agent defaults to agent, Accept to */*.
func newRequest(ctx context.Context, h *v1.HTTPGetAction, host string, port int, agent string) (*http.Request, error) {
	u := probeURL(h.Scheme, host, port, h.Path)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("build request for %s: %w", u, err)
	}
	for _, hd := range h.HTTPHeaders {
		if strings.EqualFold(hd.Name, "Host") {
			req.Host = hd.Value
			continue
		}
		req.Header.Add(hd.Name, hd.Value)
	}
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header.Set("User-Agent", agent)
	}
	if _, ok := req.Header["Accept"]; !ok {
		req.Header.Set("Accept", "*/*")
	}
	return req, nil
}

// runHTTP is the httpGet handler: GET the URL with the probe's headers (a "Host" header sets the
// request's host; User-Agent defaults to kube-probe/<major>.<minor>, Accept to */*); 2xx is Success,
// a 3xx left after redirects is Success with a warning, anything else or a transport error (refused,
// timeout, TLS) is Failure.
func (pr *Prober) runHTTP(ctx context.Context, h *v1.HTTPGetAction, host string, port int, timeout time.Duration) Result {
	if host == "" {
		return unknown("no host to probe: the pod has no IP yet")
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := newRequest(ctx, h, host, port, pr.userAgent)
	if err != nil {
		return unknown("%v", err)
	}
	resp, err := pr.http.Do(req)
	if err != nil {
		return failure("%v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBodyBytes))
	if err != nil && !errors.Is(err, io.EOF) {
		return failure("read response body: %v", err)
	}
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return success()
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return withWarning(fmt.Sprintf("Probe terminated redirects, Response body: %s", body))
	}
	// Upstream keeps the body out of the failure message (kubernetes#99425): it may hold secrets.
	return failure("HTTP probe failed with statuscode: %d", resp.StatusCode)
}
